package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/** Golden tests of the generated instructions; no kernel needed. */
class BpfDeviceProgramTest {

    @Test
    void goldenListingForAnAllowAndAWildcardDeny() {
        BpfDeviceProgram p = BpfDeviceProgram.of(List.of(DeviceRule.allowChar(195, 1, "rw"),
                DeviceRule.denyChar(195, DeviceRule.ANY, "rwm")), true);
        assertThat(p.listing()).containsExactly(
                "61 2 1 0 0", // r2 = *(u32 *)(r1 + 0)   access_type, read whole
                "bf 3 2 0 0", // r3 = r2
                "57 3 0 0 65535", // r3 &= 0xFFFF            type
                "77 2 0 0 16", // r2 >>= 16               access
                "61 4 1 4 0", // r4 = major
                "61 5 1 8 0", // r5 = minor
                "55 3 0 7 2", // if type != char skip the 7 left in this block
                "bf 6 2 0 0", // r6 = access
                "57 6 0 0 1", // r6 &= ~rw (only mknod left)
                "55 6 0 4 0", // asked for mknod: skip
                "55 4 0 3 195", // major
                "55 5 0 2 1", // minor
                "b7 0 0 0 1", // allow
                "95 0 0 0 0",
                "55 3 0 3 2", // deny block: char
                "55 4 0 2 195", // major 195, any minor, any access
                "b7 0 0 0 0", // deny
                "95 0 0 0 0",
                "b7 0 0 0 1", // default: leave to the host
                "95 0 0 0 0");
        assertThat(p.bytes()).hasSize(20 * 8);
        assertThat(p.bytes()[0]).isEqualTo((byte) 0x61);
        assertThat(p.bytes()[1]).as("dst 2, src 1").isEqualTo((byte) 0x12);
    }

    @Test
    void semanticsFirstMatchWins() {
        BpfDeviceProgram p = BpfDeviceProgram.of(List.of(DeviceRule.allowChar(195, 1, "rw"),
                DeviceRule.allowChar(195, 255, "rw"), DeviceRule.denyChar(195, 2, "rwm"),
                DeviceRule.denyChar(195, DeviceRule.ANY, "rwm")), true);
        assertThat(p.evaluate('c', 195, 1, "r")).isTrue();
        assertThat(p.evaluate('c', 195, 1, "rw")).isTrue();
        assertThat(p.evaluate('c', 195, 1, "m")).as("no mknod, even of our own GPU").isFalse();
        assertThat(p.evaluate('c', 195, 255, "w")).isTrue();
        assertThat(p.evaluate('c', 195, 2, "r")).isFalse();
        assertThat(p.evaluate('c', 195, 7, "r")).isFalse();
        assertThat(p.evaluate('c', 1, 3, "rw")).as("not a GPU: the host decides").isTrue();
        assertThat(p.evaluate('b', 195, 1, "r")).as("a block device 195:1 is not ours").isTrue();
    }

    @Test
    void strictDefaultDenies() {
        BpfDeviceProgram p = BpfDeviceProgram.of(List.of(DeviceRule.allowChar(1, 3, "rwm"),
                DeviceRule.allowChar(195, 0, "rw")), false);
        assertThat(p.evaluate('c', 1, 3, "rwm")).isTrue();
        assertThat(p.evaluate('c', 1, 5, "r")).isFalse();
        assertThat(p.evaluate('c', 195, 0, "rw")).isTrue();
    }

    @Test
    void everyRuleShapeAgreesWithADirectReading() {
        List<DeviceRule> rules = List.of(new DeviceRule(true, 'a', DeviceRule.ANY, 7, "r"),
                new DeviceRule(false, 'b', 8, DeviceRule.ANY, "w"), DeviceRule.allowChar(10, 200, "rwm"),
                DeviceRule.denyChar(DeviceRule.ANY, DeviceRule.ANY, "m"));
        BpfDeviceProgram p = BpfDeviceProgram.of(rules, true);
        for (char type : new char[]{'c', 'b'}) {
            for (int major : new int[]{8, 10, 11}) {
                for (int minor : new int[]{7, 200, 3}) {
                    for (String access : List.of("r", "w", "m", "rw", "rwm")) {
                        boolean expected = true;
                        for (DeviceRule r : rules) {
                            boolean t = r.type() == 'a' || r.type() == type;
                            boolean a = access.chars().allMatch(c -> r.access().indexOf(c) >= 0);
                            boolean ma = r.major() == DeviceRule.ANY || r.major() == major;
                            boolean mi = r.minor() == DeviceRule.ANY || r.minor() == minor;
                            if (t && a && ma && mi) {
                                expected = r.allow();
                                break;
                            }
                        }
                        assertThat(p.evaluate(type, major, minor, access))
                                .as("%s %d:%d %s", type, major, minor, access).isEqualTo(expected);
                    }
                }
            }
        }
    }

    @Test
    void rulesValidateTheirInput() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> DeviceRule.allowChar(195, 1, "rx"))
                .hasMessageContaining("subset of rwm");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> new DeviceRule(true, 'x', 1, 1, "r"))
                .hasMessageContaining("c, b or a");
        assertThat(DeviceRule.denyChar(195, DeviceRule.ANY, "rwm").v1Line()).isEqualTo("c 195:* rwm");
    }
}
