import { softphoneSuite } from "./SoftphoneSuite.ts"

// The same API tests against Kamailio (repository cfg) on loopback ports of its own.
softphoneSuite("kamailio")
