import { Effect, Result, Schema } from "effect"
import { ContactStatus, ContactStatuses, type UpdateContact } from "../../contacts/Domain.ts"
import { ContactFieldData, type ContactFields } from "../Actions.ts"
import { asActor, contactOf, defineAction, permanent, type StepError } from "./Action.ts"

const isStatus = Schema.is(ContactStatus)

const patchOf: { readonly [F in (typeof ContactFields)[number]]: (value: string | null) => Result.Result<UpdateContact, StepError> } = {
  firstName: (value) => Result.succeed({ firstName: value }),
  lastName: (value) => Result.succeed({ lastName: value }),
  displayName: (value) => Result.succeed({ displayName: value }),
  company: (value) => Result.succeed({ company: value }),
  status: (value) => isStatus(value) ? Result.succeed({ status: value }) : Result.fail(permanent(`The status must be one of ${ContactStatuses.join(", ")}.`))
}

/** The contact update that sets one field; a status must be one contacts have. */
export const contactPatch = (data: typeof ContactFieldData.Type) => patchOf[data.field](data.value)

export const updateContactField = defineAction({
  ids: ["update-contact-field"],
  data: ContactFieldData,
  run: Effect.fnUntraced(function*(data, input, services) {
    const { actor } = input
    const contactId = yield* contactOf(input)
    yield* asActor(actor, Effect.asVoid(services.contacts.get(contactId)))
    const patch = yield* Effect.fromResult(contactPatch(data))
    return {
      output: { contact_id: contactId, field: data.field },
      commit: asActor(actor, services.contacts.update(contactId, patch)).pipe(Effect.asVoid, Effect.orDie)
    }
  })
})
