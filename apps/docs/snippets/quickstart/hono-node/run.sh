pnpm exec tsx server.ts
