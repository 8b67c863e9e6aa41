import type { NamedValue } from "../providers/Provider.ts"
import type { ButtonInput, ParameterInput } from "./Domain.ts"
import type { Content } from "./Repo.ts"

const placeholder = /\{\{\s*([^{}]*?)\s*\}\}/g
/** Meta's rule for named parameters: lowercase letters, digits and underscores, starting with a letter or underscore. */
const variableName = /^[a-z_][a-z0-9_]*$/

/** The variable names of a text, in order of first appearance. */
export const variablesIn = (text: string | null): ReadonlyArray<string> => {
  if (text === null) return []
  const names: Array<string> = []
  for (const match of text.matchAll(placeholder)) if (!names.includes(match[1])) names.push(match[1])
  return names
}

export interface ContentInput {
  readonly category?: string | undefined
  readonly body?: string | undefined
  readonly parameters?: ReadonlyArray<ParameterInput> | undefined
  readonly header_enabled?: boolean | undefined
  readonly header_type?: "text" | null | undefined
  readonly header_text?: string | null | undefined
  readonly footer_enabled?: boolean | undefined
  readonly footer_text?: string | null | undefined
  readonly buttons_enabled?: boolean | undefined
  readonly buttons?: ReadonlyArray<ButtonInput> | undefined
  readonly labels?: ReadonlyArray<string> | undefined
}

const byPosition = <A extends { readonly position?: number | null | undefined }>(items: ReadonlyArray<A>) =>
  items.map((item, i) => ({ item, position: item.position ?? i + 1 })).sort((a, b) => a.position - b.position)

const blank = (s: string | null | undefined) => s === null || s === undefined || s.trim() === ""

/** The input over what there was (a draft update changes only the fields it sends), normalized. */
export const contentOf = (input: ContentInput, base: Content | null): Content => ({
  category: input.category ?? base?.category ?? "utility",
  body: input.body ?? base?.body ?? "",
  parameters: input.parameters === undefined
    ? base?.parameters ?? []
    : byPosition(input.parameters).map(({ item, position }, i) => ({
      id: i + 1,
      name: item.name.trim(),
      type: "text" as const,
      sample_value: item.sample_value ?? "",
      position
    })),
  header_enabled: input.header_enabled ?? base?.header_enabled ?? false,
  header_type: input.header_type !== undefined ? input.header_type : base?.header_type ?? null,
  header_text: input.header_text !== undefined ? input.header_text : base?.header_text ?? null,
  footer_enabled: input.footer_enabled ?? base?.footer_enabled ?? false,
  footer_text: input.footer_text !== undefined ? input.footer_text : base?.footer_text ?? null,
  buttons_enabled: input.buttons_enabled ?? base?.buttons_enabled ?? false,
  buttons: input.buttons === undefined
    ? base?.buttons ?? []
    : byPosition(input.buttons).map(({ item, position }, i) => ({
      id: i + 1,
      type: item.type,
      label: item.label.trim(),
      value: blank(item.value) ? null : item.value!.trim(),
      position
    })),
  labels: input.labels ?? base?.labels ?? []
})

/**
 * The rules of a language version, keyed by request field: variables are named (not numbered),
 * each one of body and header is declared in `parameters` with a `sample_value`, declared names
 * are unique, an enabled header or footer has its text, url and phone buttons have their value.
 */
export const contentErrors = (c: Content): Record<string, Array<string>> => {
  const errors: Record<string, Array<string>> = {}
  const add = (field: string, message: string) => {
    ;(errors[field] ??= []).push(message)
  }
  const header = c.header_enabled ? c.header_text : null
  if (c.header_enabled && blank(c.header_text)) add("header_text", "The header text field is required when the header is enabled.")
  if (c.footer_enabled && blank(c.footer_text)) add("footer_text", "The footer text field is required when the footer is enabled.")
  const declared = new Map(c.parameters.map((p) => [p.name, p]))
  for (const [field, text] of [["body", c.body], ["header_text", header]] as const) {
    for (const name of variablesIn(text)) {
      if (!variableName.test(name)) {
        add(field, `Variables are named, not numbered: {{${name}}} must be lowercase letters, digits and underscores.`)
      } else if (!declared.has(name)) {
        add(field, `The variable {{${name}}} must be declared in parameters with a sample_value.`)
      }
    }
  }
  const seen = new Set<string>()
  c.parameters.forEach((p, i) => {
    if (!variableName.test(p.name)) add(`parameters.${i}.name`, "A parameter name must be lowercase letters, digits and underscores.")
    else if (seen.has(p.name)) add(`parameters.${i}.name`, `The parameter ${p.name} is declared twice.`)
    seen.add(p.name)
    if (blank(p.sample_value)) add(`parameters.${i}.sample_value`, "The sample_value field is required.")
  })
  if (c.buttons_enabled) {
    c.buttons.forEach((b, i) => {
      if (b.type !== "quick_reply" && b.value === null) add(`buttons.${i}.value`, `A ${b.type} button needs a value.`)
    })
  }
  return errors
}

export interface Rendered {
  /** Header, body and footer with the values in, separated by blank lines: the message text we keep. */
  readonly text: string
  readonly header: ReadonlyArray<NamedValue>
  readonly body: ReadonlyArray<NamedValue>
}

export interface RenderSource {
  readonly body: string
  readonly header: string | null
  readonly footer: string | null
}

/** Fills the variables in; `Left` lists the variables without a (non-blank) value. */
export const render = (
  t: RenderSource,
  variables: Readonly<Record<string, string>>
): { readonly _tag: "Missing"; readonly names: ReadonlyArray<string> } | { readonly _tag: "Rendered"; readonly value: Rendered } => {
  const headerNames = variablesIn(t.header)
  const bodyNames = variablesIn(t.body)
  const has = (name: string) => Object.hasOwn(variables, name) && !blank(variables[name])
  const missing = [...headerNames, ...bodyNames].filter((name, i, all) => !has(name) && all.indexOf(name) === i)
  if (missing.length > 0) return { _tag: "Missing", names: missing }
  const fill = (text: string) => text.replace(placeholder, (_, name: string) => variables[name])
  const text = [t.header === null ? null : fill(t.header), fill(t.body), t.footer].filter((s) => s !== null && s !== "").join("\n\n")
  return {
    _tag: "Rendered",
    value: {
      text,
      header: headerNames.map((name) => ({ name, value: variables[name] })),
      body: bodyNames.map((name) => ({ name, value: variables[name] }))
    }
  }
}

/** The provider's name of a group: its slug, which already follows the provider's rule. */
export const providerName = (slug: string) => slug

/** A slug from a name: lowercase letters, digits and underscores. */
export const slugify = (name: string) => {
  const slug = name.normalize("NFKD").replace(/\p{M}+/gu, "").toLowerCase().replace(/[^a-z0-9]+/g, "_").replace(/^_+|_+$/g, "")
  return (slug === "" ? "template" : slug).slice(0, 90)
}
