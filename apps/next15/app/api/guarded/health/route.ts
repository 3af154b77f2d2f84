export const dynamic = "force-dynamic";

/** Matched by middleware.ts but skipped: never limited, no rate-limit headers. */
export function GET(): Response {
  return Response.json({ ok: true });
}
