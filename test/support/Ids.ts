let counter = 0

/** A string no other test run or file will make: `prefix-<time><counter><random>`, or just the suffix without a prefix. */
export const unique = (prefix?: string) => {
  const suffix = `${Date.now().toString(36)}${(counter++).toString(36)}${Math.random().toString(36).slice(2, 6)}`
  return prefix === undefined ? suffix : `${prefix}-${suffix}`
}

export const uniqueEmail = (prefix: string) => `${unique(prefix)}@example.test`
