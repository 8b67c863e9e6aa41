import { NodeClusterSocket, NodeCrypto } from "@effect/platform-node"
import { Duration, Effect, Layer, Option } from "effect"
import { RunnerAddress, SingleRunner } from "effect/cluster"
import { AppConfig } from "../src/platform/Config.ts"

/** SingleRunner in embedded mode (PGlite has one session); socket runners sharing SQL storage in server mode. */
export const ClusterLayer = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  // Messages to an entity on this runner skip the encode/decode round trip that only simulates
  // a remote hop (remote ones are serialized anyway): every request makes one rate-limit call.
  const shardingConfig = { simulateRemoteSerialization: false }
  if (config.cluster === "single") {
    return SingleRunner.layer({ runnerStorage: "memory", shardingConfig }).pipe(Layer.provide(NodeCrypto.layerDigest))
  }
  return NodeClusterSocket.layer({
    storage: "sql",
    shardingConfig: {
      ...shardingConfig,
      // A runner killed without a goodbye keeps its shards until its heartbeat is older than the lease, or a
      // health check (run by whichever runner holds that singleton) finds it dead; the library's defaults
      // (35 s, once a minute) would leave its conversations unreachable that long.
      runnerHealthCheckInterval: Duration.millis(config.runnerHealthCheckMs),
      shardLockExpiration: Duration.millis(config.clusterLeaseMs),
      shardLockRefreshInterval: Duration.millis(Math.max(1_000, Math.floor(config.clusterLeaseMs / 3))),
      runnerAddress: Option.some(RunnerAddress.make(config.runnerHost, config.runnerPort)),
      runnerListenAddress: Option.some(RunnerAddress.make("0.0.0.0", config.runnerPort))
    }
  })
}))
