/// The MQTT bridge's pure parts: the broker address guard, node names, topics sanitised,
/// the discovery configs Home Assistant reads, and command payloads read strictly. The
/// bridge against a real mosquitto and a real Home Assistant: Tests/cli/test_mqtt.py and
/// test_home_assistant.py.
import Glibc
import StillMomentCore
import Testing
@testable import StillMomentControl

@Suite("MQTT and Home Assistant discovery")
struct MQTTTests {
    @Test("broker addresses: host, IPv4, [IPv6], a port; anything else refused")
    func broker() throws {
        #expect(try MQTTBroker(parsing: "pi.local") == MQTTBroker(parsing: "pi.local:1883"))
        #expect(try MQTTBroker(parsing: "10.0.0.2:1884").port == 1884)
        #expect(try MQTTBroker(parsing: "h", tls: true).port == 8883)
        let v6 = try MQTTBroker(parsing: "[fe80::1]:1883")
        #expect(v6.host == "fe80::1" && v6.description == "[fe80::1]:1883")
        for bad in ["", "a b", "h:0", "h:65536", "h:", "h:1x", "-o", ".h", "mqtt://h", "[zz]", "[::1", "h\n", "h;rm",
                    String(repeating: "a", count: 254), "h:1:2", "ü.de"] {
            #expect(throws: CoreError.self, "\(bad)") { try MQTTBroker(parsing: bad) }
        }
    }

    @Test("node names and paths pass one guard each; topics from text are sanitised")
    func guards() {
        #expect((try? MQTTConfig.checkNode("pi-4_cushion")) == "pi-4_cushion")
        for bad in ["", "Pi", "a/b", "a+b", "#", String(repeating: "a", count: 65)] {
            #expect(throws: CoreError.self) { try MQTTConfig.checkNode(bad) }
        }
        #expect((try? MQTTConfig.checkPath("/etc/ca.pem", option: "x")) == "/etc/ca.pem")
        for bad in ["rel", "", "/a\u{1}b", "/" + String(repeating: "a", count: 4096)] {
            #expect(throws: CoreError.self) { try MQTTConfig.checkPath(bad, option: "x") }
        }
        #expect(MQTTTopics.sanitise("Morning Sit/+#\u{0}é") == "morning_sit_____")
        #expect(MQTTTopics.sanitise("") == "_")
        #expect(MQTTTopics(node: "A/B").base == "stillmoment/a_b")
    }

    @Test("discovery: one device, stable unique ids, the main entity's name null, no object_id")
    func discovery() throws {
        let d = HomeAssistantDiscovery(topics: MQTTTopics(node: "cushion"), version: "1.2.3", webURL: "http://pi:8181/",
                                       presets: ["Morning", "Settings", "Evening"])
        let all = d.all
        #expect(all.count == 16)
        #expect(Set(all.map(\.topic)).count == 16)
        var ids = Set<String>()
        for (topic, payload) in all {
            #expect(topic.hasPrefix("homeassistant/") && topic.hasSuffix("/config") && topic.contains("/cushion/"))
            guard case .object(let c)? = try? JSONParser.parse(Array(payload.utf8)) else { Issue.record("not an object"); continue }
            #expect(c["object_id"] == nil)
            #expect(c["availability_topic"] == .string("stillmoment/cushion/availability"))
            guard case .string(let id)? = c["unique_id"] else { Issue.record("no unique_id"); continue }
            ids.insert(id)
            guard case .object(let device)? = c["device"] else { Issue.record("no device"); continue }
            #expect(device["identifiers"] == .array([.string("stillmoment_cushion")]))
            #expect(device["sw_version"] == .string("1.2.3"))
            #expect(device["configuration_url"] == .string("http://pi:8181/"))
            #expect(c["origin"] != nil)
        }
        #expect(ids.count == 16 && ids.contains("stillmoment_cushion_start"))
        let start = d.config(HomeAssistantEntity.all[0])
        #expect(start["name"] == .null && start["command_topic"] == .string("stillmoment/cushion/cmd/start"))
        // The select's options: "Settings" once, first.
        let select = d.config(try #require(HomeAssistantEntity.all.first { $0.object == "preset" }))
        #expect(select["options"] == .array([.string("Settings"), .string("Morning"), .string("Evening")]))
    }

    @Test("commands are read strictly: exact payloads, bounded, no control characters")
    func commands() throws {
        let t = MQTTTopics(node: "n")
        func parse(_ object: String, _ payload: String) throws(MQTTRefusal) -> MQTTCommand? {
            try MQTTCommand.parse(topic: t.command(object), payload: Array(payload.utf8), topics: t)
        }
        #expect(try parse("start", "PRESS") == .press(.start))
        #expect(try parse("start_preset", "PRESS") == .press(.startPreset))
        #expect(try parse("minutes", "20") == .setMinutes(20))
        #expect(try parse("minutes", "20.0") == .setMinutes(20))
        #expect(try parse("schedules", "OFF") == .schedules(false))
        #expect(try parse("preset", "Morning") == .choosePreset("Morning"))
        #expect(try MQTTCommand.parse(topic: "other/topic", payload: [], topics: t) == nil)
        for (object, payload) in [("start", "press"), ("start", ""), ("minutes", "0"), ("minutes", "601"), ("minutes", "2.5"),
                                  ("minutes", "nan"), ("minutes", "1e400"), ("schedules", "on"), ("preset", ""),
                                  ("preset", "a\u{1}b"), ("nope", "PRESS"), ("preset", String(repeating: "x", count: 513))] {
            #expect(throws: MQTTRefusal.self, "\(object) \(payload.prefix(20))") { try parse(object, payload) }
        }
        #expect(throws: MQTTRefusal.self) {
            try MQTTCommand.parse(topic: t.command("preset"), payload: [0xff, 0xfe], topics: t)
        }
    }

    @Test("the password file: yours, 0600 or stricter, small; its newline dropped")
    func passwordFile() throws {
        let path = "/tmp/sm-mqtt-pw-\(getpid())"
        defer { unlink(path) }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0)
        _ = "s3cret\n".withCString { write(fd, $0, 7) }
        close(fd)
        #expect(try MQTTConfig.readPassword(path) == "s3cret")
        chmod(path, 0o640)
        #expect(throws: CoreError.self) { try MQTTConfig.readPassword(path) }
        #expect(throws: CoreError.self) { try MQTTConfig.readPassword(path + "-missing") }
    }
}
