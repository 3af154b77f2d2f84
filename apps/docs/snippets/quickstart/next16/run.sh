pnpm exec next dev
