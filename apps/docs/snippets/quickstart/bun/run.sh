bun run server.ts
