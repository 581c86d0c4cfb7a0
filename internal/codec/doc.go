// Package codec holds the hand-built JSON codecs of jobgate's records: the
// stored job record (AppendRecord, MarshalRecord, UnmarshalRecord with its
// fast path) and the public resource (AppendResource, AppendRecordResource).
// They write exactly the bytes encoding/json writes for these structs and
// read back exactly what encoding/json reads, without reflection. The JSON
// primitives under them (white space, strings, numbers, the string
// escaper) are internal/canon's, shared with the strict decoder and the
// canonical form. The records themselves, their states and transitions are
// internal/job's, which imports no codec.
package codec
