/**
 * Debian's `chromium` for the browser tests (`@sluice/testing/chromium`): `CHROMIUM_PATH` if set,
 * else `chromium` on `PATH`. Without one the test fails, never skips, with the command that
 * installs it (`pnpm test` runs it itself when it may).
 *
 * @module
 */
import { execFileSync } from "node:child_process";

/** The command that installs Chromium on Debian/Ubuntu; quoted in the "not found" error. */
export const CHROMIUM_INSTALL_HINT = "apt-get update && apt-get install -y chromium";

/**
 * The Chromium executable for playwright-core's `chromium.launch({ executablePath })`.
 *
 * @param who - What needs it, for the error message: `"The playground's browser test"`.
 * @example
 * ```ts
 * const browser = await chromium.launch({ executablePath: chromiumPath("The docs site's browser test"), args: ["--no-sandbox"] });
 * ```
 */
export function chromiumPath(who: string): string {
  const fromEnv = process.env.CHROMIUM_PATH;
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  try {
    const found = execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
    if (found !== "") return found;
  } catch {
    // not found: fall through to the message
  }
  throw new Error(
    `${who} needs Chromium, and \`chromium\` is not on PATH. Install Debian's package: \`${CHROMIUM_INSTALL_HINT}\` ` +
      "(as root; `pnpm test` does it when it can), or set CHROMIUM_PATH.",
  );
}
