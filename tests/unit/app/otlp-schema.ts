/**
 * The OTLP JSON shape of an `ExportTraceServiceRequest` (opentelemetry-proto, its JSON encoding:
 * ids as lowercase hex, 32 digits for a trace and 16 for a span; times as Unix nanoseconds in
 * decimal strings; int64 attribute values as decimal strings; enums as numbers), as a TypeBox schema
 * the trace export's tests check every file against. Strict: a member the encoding does not name is
 * refused. Only the parts the export writes are allowed (one level of array values, no events or
 * links), so a change that writes something else is seen here first.
 */
import { Type } from "typebox";

const strict = { additionalProperties: false } as const;
const Hex = (digits: number) => Type.String({ pattern: `^(?!0+$)[0-9a-f]{${digits}}$` });
const Nanos = Type.String({ pattern: "^(0|[1-9][0-9]*)$" });

const Scalar = Type.Union([
  Type.Object({ stringValue: Type.String() }, strict),
  Type.Object({ intValue: Type.String({ pattern: "^-?(0|[1-9][0-9]*)$" }) }, strict),
  Type.Object({ doubleValue: Type.Number() }, strict),
  Type.Object({ boolValue: Type.Boolean() }, strict),
]);
const AnyValue = Type.Union([
  Scalar,
  Type.Object({ arrayValue: Type.Object({ values: Type.Array(Scalar) }, strict) }, strict),
]);
const Attributes = Type.Array(Type.Object({ key: Type.String({ minLength: 1 }), value: AnyValue }, strict));

export const OtlpSpanSchema = Type.Object(
  {
    traceId: Hex(32),
    spanId: Hex(16),
    parentSpanId: Type.Optional(Hex(16)),
    name: Type.String({ minLength: 1 }),
    // SPAN_KIND_UNSPECIFIED .. SPAN_KIND_CONSUMER
    kind: Type.Integer({ minimum: 0, maximum: 5 }),
    startTimeUnixNano: Nanos,
    endTimeUnixNano: Nanos,
    attributes: Attributes,
    // STATUS_CODE_UNSET, _OK, _ERROR
    status: Type.Object(
      {
        code: Type.Union([Type.Literal(0), Type.Literal(1), Type.Literal(2)]),
        message: Type.Optional(Type.String()),
      },
      strict,
    ),
  },
  strict,
);

export const ExportTraceServiceRequestSchema = Type.Object(
  {
    resourceSpans: Type.Array(
      Type.Object(
        {
          resource: Type.Object({ attributes: Attributes }, strict),
          scopeSpans: Type.Array(
            Type.Object(
              {
                scope: Type.Object({ name: Type.String({ minLength: 1 }), version: Type.String() }, strict),
                spans: Type.Array(OtlpSpanSchema),
              },
              strict,
            ),
          ),
        },
        strict,
      ),
      { minItems: 1 },
    ),
  },
  strict,
);
