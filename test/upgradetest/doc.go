// Package upgradetest is the rolling-upgrade test (make upgrade-test, not
// make test: it builds an earlier commit of jobgate from git history,
// which takes minutes). It runs two binaries as processes, the previous
// release's and this tree's, named by JOBGATE_UPGRADE_OLD and
// JOBGATE_UPGRADE_NEW (scripts/upgrade-test.sh builds them), and skips
// when they are not given:
//
//   - on one data dir: jobs admitted and running under the old serve, the
//     old one stopped (SIGTERM) and the new one started on the same data
//     dir;
//   - side by side on one NATS server: old gateway, dispatcher, renderer
//     and notifier, then new dispatcher and renderer beside the old ones,
//     the old ones stopped, then the gateway and notifier replaced, jobs
//     admitted through both gateways throughout.
//
// Either way no job is lost or doubled: every key replays to its job,
// every job succeeds, and the requester's job list holds exactly one job
// per key. docs/operations.md, "Upgrades".
package upgradetest
