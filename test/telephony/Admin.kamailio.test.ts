import { whenAvailable } from "../support/Requires.ts"
import { kamailioNeeds } from "./support.ts"
import { adminSuite } from "./AdminSuite.ts"

// The same API tests against Kamailio (repository cfg) on loopback ports of its own.
whenAvailable(kamailioNeeds, "operator telephony on Kamailio", () => adminSuite("kamailio"))
