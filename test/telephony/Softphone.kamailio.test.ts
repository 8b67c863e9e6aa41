import { whenAvailable } from "../support/Requires.ts"
import { kamailioNeeds } from "./support.ts"
import { softphoneSuite } from "./SoftphoneSuite.ts"

// The same API tests against Kamailio (repository cfg) on loopback ports of its own.
whenAvailable(kamailioNeeds, "softphone on Kamailio", () => softphoneSuite("kamailio"))
