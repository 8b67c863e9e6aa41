// vitest 5 targets Node 22 and calls Map.groupBy / Object.groupBy (Node 21+).
// These machines run Node 20, so the runner gets the two functions; app code does not use them.
const groupInto = (make, set) => function (items, keyOf) {
  const out = make()
  let i = 0
  for (const item of items) set(out, keyOf(item, i++), item)
  return out
}
if (typeof Map.groupBy !== "function") {
  Map.groupBy = groupInto(() => new Map(), (m, k, v) => (m.has(k) ? m.get(k).push(v) : m.set(k, [v])))
}
if (typeof Object.groupBy !== "function") {
  Object.groupBy = groupInto(() => Object.create(null), (o, k, v) => ((o[k] ??= []).push(v)))
}
