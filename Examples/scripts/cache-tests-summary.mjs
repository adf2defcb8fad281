// Summarises results of the HTTP cache test suite (github.com/http-tests/cache-tests) per group,
// side by side, as a Markdown table.
//
//     node Examples/scripts/cache-tests-summary.mjs SUITE_DIR NAME=results.json [NAME=results.json ...]
//
// SUITE_DIR is a checkout of the suite; each results file is what its command-line client
// printed, or one of its published results (SUITE_DIR/results/*.json). A cell reads
// "passed / required failures / optional failures", counted as the suite reports them (a test
// whose dependency failed is not a pass), over the tests of that group.

import fs from 'fs'
import path from 'path'
import { pathToFileURL } from 'url'

const [suiteDir, ...runs] = process.argv.slice(2)
if (!suiteDir || runs.length === 0) {
  console.error('usage: cache-tests-summary.mjs SUITE_DIR NAME=results.json ...')
  process.exit(2)
}
const load = (file) => import(pathToFileURL(path.join(path.resolve(suiteDir), file)).href)
const suites = (await load('tests/index.mjs')).default
const { determineTestResult, resultTypes } = await load('test-engine/lib/results.mjs')

const columns = runs.map((run) => {
  const [name, file] = run.split('=')
  return { name, results: JSON.parse(fs.readFileSync(file, 'utf8')) }
})

function count (suite, results) {
  const tally = { pass: 0, fail: 0, optional: 0, other: 0, tests: 0 }
  for (const test of suite.tests) {
    tally.tests += 1
    const outcome = determineTestResult(suites, test.id, results)
    if (outcome === resultTypes.pass || outcome === resultTypes.yes) tally.pass += 1
    else if (outcome === resultTypes.fail) tally.fail += 1
    else if (outcome === resultTypes.optional_fail) tally.optional += 1
    else tally.other += 1
  }
  return tally
}

const header = ['group', 'tests', ...columns.map((column) => column.name)]
const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`]
const totals = columns.map(() => ({ pass: 0, fail: 0, optional: 0, other: 0, tests: 0 }))
let testCount = 0
for (const suite of suites) {
  const cells = columns.map((column, index) => {
    const tally = count(suite, column.results)
    for (const key of Object.keys(tally)) totals[index][key] += tally[key]
    return `${tally.pass} / ${tally.fail} / ${tally.optional}`
  })
  testCount += suite.tests.length
  lines.push(`| ${suite.name} | ${suite.tests.length} | ${cells.join(' | ')} |`)
}
lines.push(`| **all** | **${testCount}** | ${totals.map((t) => `**${t.pass} / ${t.fail} / ${t.optional}**`).join(' | ')} |`)
console.log(lines.join('\n'))

if (process.env.LIST_FAILURES) {
  for (const column of columns) {
    console.log(`\nRequired failures, ${column.name}:`)
    for (const suite of suites) {
      for (const test of suite.tests) {
        if (determineTestResult(suites, test.id, column.results) === resultTypes.fail) {
          const result = column.results[test.id]
          console.log(`- ${test.id}: ${Array.isArray(result) ? result[1] : result}`)
        }
      }
    }
  }
}
