pnpm exec tsx limit.ts
