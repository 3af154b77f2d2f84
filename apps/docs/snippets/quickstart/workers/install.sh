pnpm init --init-type module
pnpm add "$SLUICE_TARBALLS/sluice-core-0.1.0.tgz" "$SLUICE_TARBALLS/sluice-cloudflare-0.1.0.tgz"
# wrangler 4.86.0: the last release that runs on Node.js 20
pnpm add -D wrangler@4.86.0 @cloudflare/workers-types typescript
