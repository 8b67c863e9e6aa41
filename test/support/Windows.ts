/** The most of `times` (ms) that fall in any window of `windowMs`: what a rate limit counts at its busiest. */
export const busiest = (times: ReadonlyArray<number>, windowMs: number) => {
  const sorted = [...times].sort((a, b) => a - b)
  let most = 0
  for (let to = 0, from = 0; to < sorted.length; to++) {
    while (sorted[to] - sorted[from] >= windowMs) from++
    most = Math.max(most, to - from + 1)
  }
  return most
}
