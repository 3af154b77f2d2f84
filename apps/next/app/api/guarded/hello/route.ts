import { storeKind } from "../../../../lib/limits";

export const dynamic = "force-dynamic";

/** Behind proxy.ts: the rate-limit headers come from the proxy, merged into this response. */
export function GET(): Response {
  return Response.json({ route: "guarded", store: storeKind() });
}
