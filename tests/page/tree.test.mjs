// Sub-sessions in the page (tests/it/page.rs sets up ATC_PARENT, ATC_OTHER and ATC_SUB, a
// sub-session of ATC_PARENT spawned last). The list shows the sub-session's row right under
// its parent's, marked and indented, whatever the order of the rest.

import { ATC_TOKEN, check, run, shot, signIn } from './harness.mjs';

const { ATC_PARENT, ATC_OTHER, ATC_SUB } = process.env;
if (!ATC_PARENT || !ATC_OTHER || !ATC_SUB) {
  console.error('ATC_PARENT, ATC_OTHER and ATC_SUB must be set (tests/it/page.rs sets them)');
  process.exit(2);
}

await run(async ({ page }) => {
  await page.goto(process.env.ATC_URL);
  await signIn(page, ATC_TOKEN);
  const sub = `tr.session[data-id="${ATC_SUB}"]`;
  await page.waitForSelector(sub);
  await page.waitForSelector(`tr.session[data-id="${ATC_OTHER}"]`);
  const ids = await page.$$eval('#fleet tbody tr.session', (rows) => rows.map((r) => r.dataset.id));
  const at = ids.indexOf(ATC_PARENT);
  check(at >= 0 && ids[at + 1] === ATC_SUB, `the sub-session follows its parent: ${ids.join(', ')}`);
  check(await page.$eval(sub, (r) => r.classList.contains('sub')), 'its row is marked as a sub-session');
  check((await page.textContent(`${sub} td.name`)).startsWith('└ '), 'its name is marked');
  const indent = await page.$eval(`${sub} td.name`, (td) => parseFloat(getComputedStyle(td).paddingLeft));
  const parentIndent = await page.$eval(`tr.session[data-id="${ATC_PARENT}"] td.name`, (td) =>
    parseFloat(getComputedStyle(td).paddingLeft),
  );
  check(indent > parentIndent, `it is indented (${indent}px against ${parentIndent}px)`);
  await shot(page, 'tree');
});
