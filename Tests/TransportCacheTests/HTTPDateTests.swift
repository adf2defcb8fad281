import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("HTTP dates")
struct HTTPDateTests {
    @Test(
        "the three forms HTTP allows are read, names in any case",
        arguments: [
            "Thu, 18 Aug 2050 02:01:18 GMT", "Thursday, 18-Aug-50 02:01:18 GMT", "Thu Aug 18 02:01:18 2050",
            "THU, 18 AUG 2050 02:01:18 gmt",
        ])
    func validForms(value: String) throws {
        let date = try #require(HTTPDate.parse(value))
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
        #expect(HTTPDate.parse(value) == nil)
    }

    @Test("a two-digit year more than 50 years ahead is in the past century")
    func twoDigitYear() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        let year = calendar.component(.year, from: Date())
        let ahead = (year + 60) % 100
        let date = try #require(HTTPDate.parse(String(format: "Sunday, 06-Nov-%02d 08:49:37 GMT", ahead)))
        #expect(calendar.component(.year, from: date) == year + 60 - 100)
    }
}
