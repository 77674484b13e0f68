// The fabric scenario of ha_bench (`ha_bench --only fabric`): one leader holds a whole fat-tree
// k=32 (1,280 switches, 8,192 hosts), emulated by one `inac switch --devices 1280` process (one
// gRPC server, one device per switch: southbound/emulator/emulated_switch.h), under a 2-node
// cluster (`inac serve --cluster-endpoints`, lease TTL 3 s) on a 3-member etcd
// (tests/ha/etcd_cluster.h). Planning uses ATP routing so that the LP does not dominate; its time
// is reported apart.
//
// Each run measures:
//  - cold_start_s: with the jobs already submitted (stored, waiting for a topology), from the
//    PUT /topology that names the 1,280 switches until the leader reports every switch reconciled
//    to its final plan (connect, arbitrate, push the pipeline, read back, program the entries);
//    plan_solve_ms is the plan's own planning time, included in cold_start_s;
//  - failover_s: from kill -9 of the leader until the other node, elected, reports every switch
//    reconciled (arbitrate as primary, read back, diff) in a visit made after the kill;
//    new_leader_s is the election part (the etcd leader key changed hands).
// "Reconciled" is read from the controller's GET /switches (systest::AwaitFleetReconciled: applied
// version == the plan's, no error, primary, contacted after the start of the measurement); after
// each measurement, outside the timing, every switch is read back over P4Runtime from 8 threads
// and compared with the plan (systest::CompareFabricParallel), and the run fails on a difference.
//
// Prints one JSON line per run ({"bench":"ha_fabric","run":i,...}) and, when runs > 1, a summary
// line with p50 / p99 of each figure. Needs an etcd binary (the caller checks).
#pragma once

#include <string>

// Runs the scenario `runs` times with its files under `dir`. 0 when every run converged and read
// back equal to its plan; 1 after printing the reason of the first failure to stderr.
int RunFabricBench(const std::string& dir, int runs);
