export default function Home() {
  return (
    <main>
      <h1>Sluice on Next.js</h1>
      <ul>
        <li>
          <code>GET /api/guarded/hello</code>: limited by <code>proxy.ts</code> (a burst of 3, one more every 20.25 s)
        </li>
        <li>
          <code>GET /api/wrapped</code>: a route handler wrapped with <code>withRateLimit</code> (Node.js runtime)
        </li>
        <li>
          <code>GET /api/edge</code>: the same on the edge runtime
        </li>
      </ul>
      <p>
        Send <code>x-api-key</code> to get your own quota.
      </p>
    </main>
  );
}
