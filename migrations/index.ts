import _0001_kernel from "./0001_kernel.ts"
import _0002_messaging from "./0002_messaging.ts"

/** Every migration, keyed `<id>_<name>`; add the next one here when it lands. */
export const migrations = {
  "0001_kernel": _0001_kernel,
  "0002_messaging": _0002_messaging
}
