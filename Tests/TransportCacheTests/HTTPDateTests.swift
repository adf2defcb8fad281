import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("HTTP dates")
struct HTTPDateTests {
    /// 2027: every date below reads the same against it.
    let reference = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(
        "the three forms HTTP allows are read, names in any case",
        arguments: [
            "Thu, 18 Aug 2050 02:01:18 GMT", "Thursday, 18-Aug-50 02:01:18 GMT", "Thu Aug 18 02:01:18 2050",
            "THU, 18 AUG 2050 02:01:18 gmt",
        ])
    func validForms(value: String) throws {
        let date = try #require(HTTPDate.parse(value, now: reference))
        #expect(date.timeIntervalSince1970 == 2_544_400_878)
    }

    @Test(
        "anything else is no date",
        arguments: [
            "Thu, 18 Aug 2050 02:01:18 UTC", "Thu, 18 Aug 2050 02:01:18 AEST", "Thu, 18 Aug 50 02:01:18 GMT",
            "Thu 18 Aug 2050 02:01:18 GMT", "Thu, 18  Aug  2050 02:01:18 GMT", "Thu, 18-Aug-2050 02:01:18 GMT",
            "Thu, 18 Aug 2050 02.01.18 GMT", "Thu, 18 Aug 2050 2:01:18 GMT", "0", "",
            "Thu, 18 Aug 2050 2:01:18 GMT, Thu, 18 Aug 2050 2:01:19 GMT",
        ])
    func invalidForms(value: String) {
        #expect(HTTPDate.parse(value, now: reference) == nil)
    }

    @Test("a two-digit year more than 50 years after the transport's clock is in the century before")
    func twoDigitYear() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        func year(_ value: String, readIn now: Int) throws -> Int {
            let reference = try #require(calendar.date(from: DateComponents(year: now, month: 6, day: 1)))
            return calendar.component(.year, from: try #require(HTTPDate.parse(value, now: reference)))
        }
        let value = "Sunday, 06-Nov-90 08:49:37 GMT"
        #expect(try year(value, readIn: 2026) == 1990)
        #expect(try year(value, readIn: 2045) == 2090)
    }
}
