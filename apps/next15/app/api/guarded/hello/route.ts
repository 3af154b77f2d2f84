export const dynamic = "force-dynamic";

/** Behind middleware.ts: the rate-limit headers come from the middleware, merged into this response. */
export function GET(): Response {
  return Response.json({ route: "guarded", next: 15 });
}
