/**
 * HTTP-date (RFC 9110 §5.6.7): the preferred IMF-fixdate and the two obsolete forms a recipient
 * must accept (RFC 850 and ANSI C's asctime).
 *
 * @module
 */

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const DAY = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)";
const LONG_DAY = "(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)";
const MONTH = `(${MONTHS.join("|")})`;
const TIME = "(\\d{2}):(\\d{2}):(\\d{2})";

/** `Sun, 06 Nov 1994 08:49:37 GMT` */
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
/** `Sunday, 06-Nov-94 08:49:37 GMT` */
const RFC850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
/** `Sun Nov  6 08:49:37 1994` */
const ASCTIME = new RegExp(`^${DAY} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`);

function utc(year: number, month: string, day: number, h: number, m: number, s: number): number | undefined {
  const monthIndex = MONTHS.indexOf(month);
  if (h > 23 || m > 59 || s > 60) return undefined;
  const ms = Date.UTC(year, monthIndex, day, h, m, Math.min(s, 59));
  const date = new Date(ms);
  // reject 31 Feb and the like instead of letting Date roll them over
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== monthIndex || date.getUTCDate() !== day) return undefined;
  return ms;
}

/**
 * Parses an HTTP-date to epoch milliseconds; `undefined` if `text` is not one. A two-digit RFC 850
 * year more than 50 years in the future of `now` is taken to be in the past century (RFC 9110).
 */
export function parseHttpDate(text: string, now: number): number | undefined {
  let match = IMF_FIXDATE.exec(text);
  if (match) {
    const [, d, mon, y, h, m, s] = match as unknown as [string, string, string, string, string, string, string];
    return utc(Number(y), mon, Number(d), Number(h), Number(m), Number(s));
  }
  match = RFC850.exec(text);
  if (match) {
    const [, d, mon, yy, h, m, s] = match as unknown as [string, string, string, string, string, string, string];
    const currentYear = new Date(now).getUTCFullYear();
    let year = Math.floor(currentYear / 100) * 100 + Number(yy);
    if (year > currentYear + 50) year -= 100;
    return utc(year, mon, Number(d), Number(h), Number(m), Number(s));
  }
  match = ASCTIME.exec(text);
  if (match) {
    const [, mon, d, h, m, s, y] = match as unknown as [string, string, string, string, string, string, string];
    return utc(Number(y), mon, Number(d.trim()), Number(h), Number(m), Number(s));
  }
  return undefined;
}
