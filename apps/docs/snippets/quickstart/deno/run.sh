deno run --allow-net --allow-env=PORT main.ts
