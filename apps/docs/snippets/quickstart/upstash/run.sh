pnpm exec tsx --env-file=.env limit.ts
