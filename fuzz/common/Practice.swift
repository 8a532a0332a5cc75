// Shared by the csv and json harnesses (compiled into both by fuzz/run.sh): the whole
// practice-log import of a text (CSV, or JSON when it starts with `[`) and what must hold
// of it: an entry that gets through is ours, and exported again in both formats it imports
// as the same entries; a refusal is an ImportError naming a line or record >= 1, in one
// line of text in both languages.

func checkRefusal(_ error: PracticeExport.ImportError) {
    precondition(error.line >= 1, "a refusal at line/record \(error.line)")
    for language in [Language.en, .de] {
        let text = error.text(language)
        precondition(!text.contains("\n") && !text.contains("\r"), "a refusal of more than one line: \(text.debugDescription)")
    }
}

func importChecked(_ text: String) {
    do {
        let entries = try PracticeExport.read(text)
        for e in entries {
            precondition(e.kind.isPractice && !e.name.isEmpty && e.plannedMilliseconds >= 0 && e.heardMilliseconds >= 0,
                         "an entry that is not ours got through: \(e)")
        }
        let csv = PracticeExport.csv(entries)
        do {
            let back = try PracticeExport.read(csv)
            precondition(back == entries, "CSV export/import changed an entry: \(csv.debugDescription)")
        } catch {
            preconditionFailure("a CSV export does not import: \(error) in \(csv.debugDescription)")
        }
        let json = JSON.array(PracticeExport.json(entries).map(JSON.object)).line
        do {
            let back = try PracticeExport.read(json)
            precondition(back == entries, "JSON export/import changed an entry: \(json)")
        } catch {
            preconditionFailure("a JSON export does not import: \(error) in \(json)")
        }
    } catch {
        checkRefusal(error)
    }
}
