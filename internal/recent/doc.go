// Package recent keeps bounded "seen lately" maps for hot paths where a miss
// only costs a store read: two generations of at most a given number of
// entries each; when the current generation is full it becomes the previous
// one and the older is dropped, so memory stays within twice the bound and
// what was used lately stays.
package recent
