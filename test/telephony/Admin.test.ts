import { adminSuite } from "./AdminSuite.ts"

adminSuite("in-process")
