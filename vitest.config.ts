import { availableParallelism } from "node:os"
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Most test files wait on servers, child processes and the database, not the CPU: vitest's default
    // (one file at a time on 2 cores) left CI's suite at 1,228 s on a slow 2-core machine, two at once 631 s.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // Servers that tests start as processes run side by side: none opens the default metrics port unless a test asks.
    env: { LOG_LEVEL: process.env.LOG_LEVEL ?? "warn", METRICS_PORT: process.env.METRICS_PORT ?? "0" }
  }
})
