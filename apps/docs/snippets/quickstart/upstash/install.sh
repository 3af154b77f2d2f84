pnpm init --init-type module
pnpm add "$SLUICE_TARBALLS/sluice-core-0.1.0.tgz" "$SLUICE_TARBALLS/sluice-redis-0.1.0.tgz" @upstash/redis
pnpm add -D tsx
