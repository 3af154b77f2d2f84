pnpm exec wrangler dev
