// A few lines of JSON output for the client programs (no JSON library on the classpath).
import java.util.Collection;
import java.util.Map;
import java.util.TreeMap;

final class Json {
    private Json() {}

    static String of(Object v) {
        if (v == null) return "null";
        if (v instanceof String) return quote((String) v);
        if (v instanceof Number || v instanceof Boolean) return v.toString();
        if (v instanceof Map) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : new TreeMap<>((Map<?, ?>) v).entrySet()) {
                if (b.length() > 1) b.append(',');
                b.append(quote(String.valueOf(e.getKey()))).append(':').append(of(e.getValue()));
            }
            return b.append('}').toString();
        }
        if (v instanceof Collection) {
            StringBuilder b = new StringBuilder("[");
            for (Object x : (Collection<?>) v) {
                if (b.length() > 1) b.append(',');
                b.append(of(x));
            }
            return b.append(']').toString();
        }
        return quote(v.toString());
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static void print(Map<String, ?> m) {
        System.out.println(of(m));
        System.out.flush();
    }

    /** The simple name of an exception's root cause (ExecutionException unwrapped). */
    static String error(Throwable t) {
        while (t.getCause() != null
               && (t instanceof java.util.concurrent.ExecutionException
                   || t instanceof org.apache.kafka.common.KafkaException && !(t instanceof
                       org.apache.kafka.common.errors.ApiException))) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName();
    }
}
