package io.gpusched.service.adversarial.review35;

import io.gpusched.service.UserDirectory;

/** Run in a JVM of its own: prints the groups the service's user directory finds for a user name. */
public final class NssLookupProbe {
    private NssLookupProbe() {
    }

    /** @param args the user name as hex of its UTF-8 bytes (the JVM's own argument decoding is not what is probed) */
    public static void main(String[] args) {
        String name = new String(java.util.HexFormat.of().parseHex(args[0]), java.nio.charset.StandardCharsets.UTF_8);
        System.out.println("groups=" + String.join(",", new UserDirectory().groupsOf(name)));
        System.out.println("jnu=" + System.getProperty("sun.jnu.encoding"));
    }
}
