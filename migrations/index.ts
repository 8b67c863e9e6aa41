import _0001_kernel from "./0001_kernel.ts"

/** Every migration, keyed `<id>_<name>`; add the next one here when it lands. */
export const migrations = {
  "0001_kernel": _0001_kernel
}
