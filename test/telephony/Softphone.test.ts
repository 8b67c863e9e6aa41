import { softphoneSuite } from "./SoftphoneSuite.ts"

softphoneSuite("in-process")
