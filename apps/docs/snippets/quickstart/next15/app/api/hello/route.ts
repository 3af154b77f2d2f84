export async function GET() {
  return Response.json({ hello: "world" });
}
