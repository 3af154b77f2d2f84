export default function Home() {
  return (
    <main>
      <h1>Sluice on Next.js 15</h1>
      <ul>
        <li>
          <code>GET /api/guarded/hello</code>: limited by <code>middleware.ts</code> on the edge runtime (a burst of 3, one more every 20.25 s)
        </li>
        <li>
          <code>GET /api/wrapped</code>: a route handler wrapped with <code>withRateLimit</code> (Node.js runtime)
        </li>
      </ul>
    </main>
  );
}
