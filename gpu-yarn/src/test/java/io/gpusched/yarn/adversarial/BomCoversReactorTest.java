package io.gpusched.yarn.adversarial;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

/**
 * The BOM lists every published jar module of the reactor, with the reactor's group and version, and nothing that is
 * not in the reactor. Parses the POM files directly (no Maven model), so it does not trust the build's own view.
 */
@Tag("adversarial")
class BomCoversReactorTest {

    /**
     * Jar modules that are never published: their POM sets {@code maven.deploy.skip} to true. Every other jar module
     * must be in the BOM, and none of these may be.
     */
    private final Set<String> notForHosts = new TreeSet<>();

    private static Document parse(Path p) throws Exception {
        DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
        f.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
        return f.newDocumentBuilder().parse(p.toFile());
    }

    /** @return the text of the direct child {@code name} of {@code e}, or null */
    private static String child(Element e, String name) {
        for (Node n = e.getFirstChild(); n != null; n = n.getNextSibling()) {
            if (n instanceof Element c && c.getTagName().equals(name)) {
                return c.getTextContent().trim();
            }
        }
        return null;
    }

    private static Element childElement(Element e, String name) {
        for (Node n = e.getFirstChild(); n != null; n = n.getNextSibling()) {
            if (n instanceof Element c && c.getTagName().equals(name)) {
                return c;
            }
        }
        return null;
    }

    @Test
    void everyJarModuleIsInTheBomWithTheReactorsVersion() throws Exception {
        Path root = Paths.get("..").toAbsolutePath().normalize();
        Element top = parse(root.resolve("pom.xml")).getDocumentElement();
        String group = child(top, "groupId");
        String version = child(top, "version");
        List<String> modules = new ArrayList<>();
        NodeList ms = childElement(top, "modules").getElementsByTagName("module");
        for (int i = 0; i < ms.getLength(); i++) {
            modules.add(ms.item(i).getTextContent().trim());
        }
        Set<String> jars = new TreeSet<>();
        Set<String> all = new TreeSet<>();
        Path bomPom = null;
        for (String m : modules) {
            Path pom = root.resolve(m).resolve("pom.xml");
            assertTrue(Files.isRegularFile(pom), pom.toString());
            Element e = parse(pom).getDocumentElement();
            String art = child(e, "artifactId");
            String packaging = child(e, "packaging");
            Element parent = childElement(e, "parent");
            String g = child(e, "groupId") != null ? child(e, "groupId") : child(parent, "groupId");
            assertEquals(group, g, m + " groupId");
            if (child(e, "version") != null) {
                assertEquals(version, child(e, "version"), m + " version must equal the reactor's");
            }
            if (parent != null) {
                assertEquals(version, child(parent, "version"), m + " parent version");
            }
            all.add(art);
            if (packaging == null || packaging.equals("jar")) {
                jars.add(art);
            }
            Element props = childElement(e, "properties");
            if (props != null && "true".equals(child(props, "maven.deploy.skip"))) {
                notForHosts.add(art);
            }
            if (art.equals("gpusched-bom")) {
                bomPom = pom;
            }
        }
        assertTrue(bomPom != null, "gpusched-bom is a module of the reactor: " + modules);
        Element bom = parse(bomPom).getDocumentElement();
        assertEquals(version, child(bom, "version"), "BOM version must equal the reactor's");
        assertEquals("pom", child(bom, "packaging"));
        Map<String, String> listed = new TreeMap<>();
        NodeList deps = childElement(childElement(bom, "dependencyManagement"), "dependencies")
                .getElementsByTagName("dependency");
        for (int i = 0; i < deps.getLength(); i++) {
            Element d = (Element) deps.item(i);
            assertEquals(group, child(d, "groupId").replace("${project.groupId}", group), "groupId of " + child(d,
                    "artifactId"));
            String v = child(d, "version").replace("${project.version}", version);
            String prev = listed.put(child(d, "artifactId"), v);
            assertEquals(null, prev, "listed twice: " + child(d, "artifactId"));
        }
        // gpusched-testing: the test fixtures every module's tests share (test scope only)
        assertEquals(Set.of("gpusched-benchmarks", "gpusched-examples", "gpusched-testing"), notForHosts,
                "modules that skip deploy (and so stay out of the BOM)");
        for (String a : jars) {
            if (notForHosts.contains(a)) {
                continue;
            }
            assertTrue(listed.containsKey(a), "jar module " + a + " is missing from gpusched-bom: " + listed);
            assertEquals(version, listed.get(a), a + " version in the BOM");
        }
        for (String a : listed.keySet()) {
            assertTrue(all.contains(a), "the BOM lists " + a + ", which is not a module of the reactor");
            assertTrue(!notForHosts.contains(a), a);
        }
    }
}
