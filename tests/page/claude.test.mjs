// A real Claude Code in the page (tests/it/page.rs starts it against the fake Messages API and
// names its session in ATC_CLAUDE): open it from its row, type a prompt into the terminal as a
// person would, press Enter, and see the model's reply drawn in the terminal.

import { ATC_TOKEN, check, run, shot, signIn } from './harness.mjs';

const { ATC_CLAUDE, ATC_PROMPT, ATC_REPLY } = process.env;
if (!ATC_CLAUDE || !ATC_PROMPT || !ATC_REPLY) {
  console.error('ATC_CLAUDE, ATC_PROMPT and ATC_REPLY must be set (tests/it/page.rs sets them)');
  process.exit(2);
}

// A real agent answers slower than a shell; this only bounds failure.
const AGENT_WITHIN = 60000;

await run(async ({ page }) => {
  await page.goto(process.env.ATC_URL);
  await signIn(page, ATC_TOKEN);
  const row = `tr.session[data-id="${ATC_CLAUDE}"]`;
  await page.waitForSelector(row);
  await page.click(`${row} td.name`);
  await page.waitForFunction(() => window.atc?.attached());
  await page.waitForFunction(() => window.atc.terminalText().includes('❯'), null, { timeout: AGENT_WITHIN });
  check(true, "Claude's prompt box is drawn in the page");

  await page.click('#screen');
  await page.keyboard.type(ATC_PROMPT);
  await page.waitForFunction((p) => window.atc.terminalText().includes(p), ATC_PROMPT, { timeout: AGENT_WITHIN });
  await page.keyboard.press('Enter');
  await page.waitForFunction((r) => window.atc.terminalText().includes(r), ATC_REPLY, { timeout: AGENT_WITHIN });
  check(true, 'a prompt typed in the page got its reply in the terminal');
  await shot(page, 'real-claude');
});
