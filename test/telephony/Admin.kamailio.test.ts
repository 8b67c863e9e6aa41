import { adminSuite } from "./AdminSuite.ts"

// The same API tests against Kamailio (repository cfg) on loopback ports of its own.
adminSuite("kamailio")
