import _0001_kernel from "./0001_kernel.ts"
import _0002_messaging from "./0002_messaging.ts"
import _0003_teams from "./0003_teams.ts"
import _0004_invitations from "./0004_invitations.ts"
import _0005_me from "./0005_me.ts"
import _0006_telephony from "./0006_telephony.ts"
import _0009_search from "./0009_search.ts"

/** Every migration, keyed `<id>_<name>`; add the next one here when it lands. */
export const migrations = {
  "0001_kernel": _0001_kernel,
  "0002_messaging": _0002_messaging,
  "0003_teams": _0003_teams,
  "0004_invitations": _0004_invitations,
  "0005_me": _0005_me,
  "0006_telephony": _0006_telephony,
  "0009_search": _0009_search
}
