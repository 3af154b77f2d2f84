import type { ReactNode } from "react";

export const metadata = { title: "Sluice on Next.js 15" };

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>{children}</body>
    </html>
  );
}
