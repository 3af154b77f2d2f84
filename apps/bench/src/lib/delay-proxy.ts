/**
 * A TCP proxy on 127.0.0.1 that holds every chunk for a while in each direction: a store "far
 * away" for a client on this machine. Half the added round trip is spent on the way there, half on
 * the way back, so a request and its reply each wait as they would on a long link. Chunks keep
 * their order (timers of equal delay fire in the order they were set). It speaks no protocol, so
 * the same proxy stands in front of redis-server (RESP) and of the Upstash-REST bridge (HTTP).
 *
 * @module
 */
import { type Server, type Socket, connect, createServer } from "node:net";
import type { AddressInfo } from "node:net";

/** A running proxy. */
export interface DelayProxy {
  readonly port: number;
  /** Closes every connection and the listening socket. */
  close(): Promise<void>;
}

/** Forwards what `from` receives to `to`, each chunk `delayMs` later. */
function pipeDelayed(from: Socket, to: Socket, delayMs: number): void {
  from.on("data", (chunk: Buffer) => {
    setTimeout(() => {
      if (!to.destroyed) to.write(chunk);
    }, delayMs);
  });
  from.on("end", () => setTimeout(() => to.end(), delayMs));
}

/**
 * Starts a proxy to `127.0.0.1:<targetPort>` that adds `roundTripMs` to every round trip
 * (`roundTripMs / 2` each way).
 */
export async function startDelayProxy(targetPort: number, roundTripMs: number): Promise<DelayProxy> {
  const oneWayMs = roundTripMs / 2;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, "127.0.0.1");
    for (const s of [client, upstream]) {
      s.setNoDelay(true);
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      // a reset on one side ends the other: the client sees the connection drop, as it would
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    pipeDelayed(client, upstream, oneWayMs);
    pipeDelayed(upstream, client, oneWayMs);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
