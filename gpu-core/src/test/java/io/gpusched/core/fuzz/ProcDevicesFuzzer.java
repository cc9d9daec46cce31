package io.gpusched.core.fuzz;

import io.gpusched.core.devices.CharMajors;
import java.util.Map;

/**
 * Fuzz target for {@link CharMajors#parseProcDevices(String)} (the text of {@code /proc/devices}): never throws; every
 * major it returns is 1..4095 and stands, with its name, on a line of the input's {@code Character devices:} part
 * (checked here by reading the lines again, not by the parser's code); what it returns formats and parses back to
 * itself.
 */
public final class ProcDevicesFuzzer {
    private ProcDevicesFuzzer() {
    }

    /** One input: the file's text (UTF-8). */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = Contract.text(input);
        CharMajors m;
        try {
            m = CharMajors.parseProcDevices(s);
        } catch (RuntimeException e) {
            throw new Contract.Violation("threw " + e + " (documented: never), for input " + Contract.show(s), e);
        }
        for (Map.Entry<String, Integer> e : m.asMap().entrySet()) {
            int major = e.getValue();
            Contract.check(major >= 1 && major <= CharMajors.MAX_MAJOR, "major " + major + " out of 1..4095", s);
            Contract.check(onACharacterLine(s, e.getKey(), major), e.getKey() + "=" + major
                    + " is on no line of the Character devices part", s);
        }
        Contract.check(CharMajors.parse(m.format()).equals(m), m + " does not parse back", s);
    }

    private static boolean onACharacterLine(String s, String name, int major) {
        boolean chars = false;
        for (String line : s.split("\n", -1)) {
            if (line.startsWith("Character devices")) {
                chars = true;
            } else if (line.startsWith("Block devices")) {
                chars = false;
            } else if (chars) {
                String[] f = line.trim().split("[ \t]+");
                if (f.length == 2 && f[1].equals(name) && f[0].chars().allMatch(Character::isDigit)
                        && f[0].length() <= 4 && Integer.parseInt(f[0]) == major) {
                    return true;
                }
            }
        }
        return false;
    }
}
