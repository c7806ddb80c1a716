"""Language detectors on short page texts: py3langid against lingua, by accuracy and time.

    python benchmarks/langid_short_pages.py                  # py3langid only (the project's)
    python benchmarks/langid_short_pages.py --lingua DIR     # also lingua, installed in DIR
                                                             # (pip install --target DIR lingua-language-detector)

The texts are what a SERP page says when its HTML does not say its language: a title, a product
line, a paragraph of a shop or a guide, in the seven languages of our SERPs (fr, en, de, es, it,
nl, pt). They were written for this benchmark (CBD shop and guide pages, brand names and units
left in English as real pages leave them), 12 a language: 4 titles (3–7 words), 4 sentences
(10–20 words), 4 short paragraphs (30–50 words). Both detectors are restricted to the same seven
languages (what cannaspider/firecrawl/terms.py does), and py3langid is also shown on all its 97.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from py3langid.langid import MODEL_FILE, LanguageIdentifier  # noqa: E402

from cannaspider.firecrawl import language, terms  # noqa: E402

LANGS = ("fr", "en", "de", "es", "it", "nl", "pt")

TEXTS: dict[str, list[str]] = {
    "fr": [
        "Huile de CBD bio 10 %",
        "Fleurs de CBD pas cher",
        "Livraison offerte dès 49 €",
        "Nos meilleures ventes de la semaine",
        "Découvrez notre gamme de fleurs de CBD cultivées en France sans pesticides.",
        "Chaque flacon est analysé par un laboratoire indépendant avant sa mise en vente.",
        "Le CBD ne provoque pas d'effet psychotrope et reste légal en vente libre.",
        "Ajoutez ce produit à votre panier et profitez de la livraison gratuite.",
        "Notre huile full spectrum est extraite au CO2 supercritique. Elle conserve les terpènes et les "
        "cannabinoïdes de la plante. Placez quelques gouttes sous la langue et attendez une minute avant "
        "d'avaler. Commencez par une faible dose.",
        "Les avis de nos clients sont vérifiés. Plus de deux mille personnes ont noté nos produits et la "
        "moyenne dépasse quatre étoiles et demie. Vous pouvez retourner un article sous trente jours.",
        "Questions fréquentes : combien de temps dure l'effet ? Peut-on conduire après en avoir pris ? "
        "Nos réponses s'appuient sur les études publiées et sur l'avis de pharmaciens.",
        "Le chanvre cultivé en plein air pousse au soleil du sud de la France. Nous récoltons à la main "
        "puis faisons sécher les têtes lentement, à l'abri de la lumière, pendant trois semaines.",
    ],
    "en": [
        "CBD Oil 10% Full Spectrum",
        "Best CBD flowers online",
        "Free shipping over $49",
        "Our best sellers this week",
        "Discover our range of CBD flowers grown in Oregon without pesticides.",
        "Every bottle is tested by an independent lab before it goes on sale.",
        "CBD does not make you high and is legal to buy over the counter.",
        "Add this product to your cart and enjoy free delivery.",
        "Our full spectrum oil is extracted with supercritical CO2. It keeps the terpenes and "
        "cannabinoids of the plant. Place a few drops under your tongue and wait a minute before "
        "swallowing. Start with a low dose.",
        "Our customer reviews are verified. More than two thousand people rated our products and the "
        "average is above four and a half stars. You can return an item within thirty days.",
        "Frequently asked questions: how long does the effect last? Can you drive after taking it? "
        "Our answers rely on published studies and on pharmacists' advice.",
        "Outdoor hemp grows in the sun of southern Oregon. We harvest by hand and then dry the buds "
        "slowly, away from the light, for three weeks.",
    ],
    "de": [
        "CBD Öl 10 % Vollspektrum",
        "CBD Blüten günstig kaufen",
        "Kostenloser Versand ab 49 €",
        "Unsere Bestseller der Woche",
        "Entdecken Sie unser Sortiment an CBD Blüten, ohne Pestizide in Österreich angebaut.",
        "Jede Flasche wird vor dem Verkauf von einem unabhängigen Labor geprüft.",
        "CBD macht nicht high und ist rezeptfrei legal erhältlich.",
        "Legen Sie dieses Produkt in den Warenkorb und genießen Sie den kostenlosen Versand.",
        "Unser Vollspektrum-Öl wird mit überkritischem CO2 extrahiert. Es bewahrt die Terpene und "
        "Cannabinoide der Pflanze. Geben Sie einige Tropfen unter die Zunge und warten Sie eine Minute "
        "vor dem Schlucken. Beginnen Sie mit einer niedrigen Dosis.",
        "Die Bewertungen unserer Kunden sind geprüft. Mehr als zweitausend Menschen haben unsere "
        "Produkte bewertet und der Durchschnitt liegt über viereinhalb Sternen.",
        "Häufige Fragen: Wie lange hält die Wirkung an? Darf man danach Auto fahren? Unsere Antworten "
        "stützen sich auf veröffentlichte Studien und den Rat von Apothekern.",
        "Der Hanf wächst im Freiland in der Sonne Südtirols. Wir ernten von Hand und trocknen die "
        "Blüten danach langsam, vor Licht geschützt, drei Wochen lang.",
    ],
    "es": [
        "Aceite de CBD 10 % espectro completo",
        "Flores de CBD baratas",
        "Envío gratis desde 49 €",
        "Lo más vendido esta semana",
        "Descubre nuestra gama de flores de CBD cultivadas en España sin pesticidas.",
        "Cada frasco es analizado por un laboratorio independiente antes de su venta.",
        "El CBD no coloca y es legal comprarlo sin receta.",
        "Añade este producto a tu carrito y disfruta del envío gratuito.",
        "Nuestro aceite de espectro completo se extrae con CO2 supercrítico. Conserva los terpenos y "
        "los cannabinoides de la planta. Pon unas gotas debajo de la lengua y espera un minuto antes "
        "de tragar. Empieza con una dosis baja.",
        "Las opiniones de nuestros clientes están verificadas. Más de dos mil personas han valorado "
        "nuestros productos y la media supera las cuatro estrellas y media.",
        "Preguntas frecuentes: ¿cuánto dura el efecto? ¿Se puede conducir después de tomarlo? Nuestras "
        "respuestas se basan en estudios publicados y en la opinión de farmacéuticos.",
        "El cáñamo de exterior crece al sol del sur de España. Cosechamos a mano y luego secamos los "
        "cogollos despacio, lejos de la luz, durante tres semanas.",
    ],
    "it": [
        "Olio di CBD 10% spettro completo",
        "Infiorescenze CBD economiche",
        "Spedizione gratuita da 49 €",
        "I più venduti della settimana",
        "Scopri la nostra gamma di infiorescenze di CBD coltivate in Italia senza pesticidi.",
        "Ogni flacone viene analizzato da un laboratorio indipendente prima della vendita.",
        "Il CBD non dà effetti psicoattivi ed è legale acquistarlo senza ricetta.",
        "Aggiungi questo prodotto al carrello e approfitta della spedizione gratuita.",
        "Il nostro olio a spettro completo è estratto con CO2 supercritica. Conserva i terpeni e i "
        "cannabinoidi della pianta. Metti qualche goccia sotto la lingua e aspetta un minuto prima di "
        "deglutire. Inizia con una dose bassa.",
        "Le recensioni dei nostri clienti sono verificate. Più di duemila persone hanno valutato i "
        "nostri prodotti e la media supera le quattro stelle e mezzo.",
        "Domande frequenti: quanto dura l'effetto? Si può guidare dopo averlo preso? Le nostre "
        "risposte si basano su studi pubblicati e sul parere dei farmacisti.",
        "La canapa coltivata all'aperto cresce al sole della Puglia. Raccogliamo a mano e poi "
        "essicchiamo le cime lentamente, al riparo dalla luce, per tre settimane.",
    ],
    "nl": [
        "CBD olie 10% full spectrum",
        "Goedkope CBD bloemen kopen",
        "Gratis verzending vanaf € 49",
        "Onze bestsellers van deze week",
        "Ontdek ons assortiment CBD bloemen, zonder pesticiden gekweekt in Nederland.",
        "Elk flesje wordt door een onafhankelijk laboratorium getest voordat het verkocht wordt.",
        "CBD maakt je niet high en is zonder recept legaal te koop.",
        "Voeg dit product toe aan je winkelwagen en geniet van gratis verzending.",
        "Onze full spectrum olie wordt geëxtraheerd met superkritisch CO2. Ze behoudt de terpenen en "
        "cannabinoïden van de plant. Leg een paar druppels onder je tong en wacht een minuut voordat "
        "je doorslikt. Begin met een lage dosis.",
        "De beoordelingen van onze klanten zijn geverifieerd. Meer dan tweeduizend mensen hebben onze "
        "producten beoordeeld en het gemiddelde ligt boven de vierenhalve ster.",
        "Veelgestelde vragen: hoe lang duurt het effect? Mag je daarna autorijden? Onze antwoorden "
        "steunen op gepubliceerde studies en op het advies van apothekers.",
        "Buitenhennep groeit in de zon van Zeeland. We oogsten met de hand en drogen de toppen daarna "
        "langzaam, uit het licht, drie weken lang.",
    ],
    "pt": [
        "Óleo de CBD 10% espectro total",
        "Flores de CBD baratas online",
        "Portes grátis a partir de 49 €",
        "Os mais vendidos da semana",
        "Descubra a nossa gama de flores de CBD cultivadas em Portugal sem pesticidas.",
        "Cada frasco é analisado por um laboratório independente antes de ser vendido.",
        "O CBD não causa efeito psicoativo e é legal comprá-lo sem receita.",
        "Adicione este produto ao carrinho e aproveite os portes grátis.",
        "O nosso óleo de espectro total é extraído com CO2 supercrítico. Conserva os terpenos e os "
        "canabinoides da planta. Coloque algumas gotas debaixo da língua e espere um minuto antes de "
        "engolir. Comece com uma dose baixa.",
        "As avaliações dos nossos clientes são verificadas. Mais de duas mil pessoas avaliaram os "
        "nossos produtos e a média ultrapassa as quatro estrelas e meia.",
        "Perguntas frequentes: quanto tempo dura o efeito? Pode-se conduzir depois de o tomar? As "
        "nossas respostas baseiam-se em estudos publicados e na opinião de farmacêuticos.",
        "O cânhamo de exterior cresce ao sol do Alentejo. Colhemos à mão e depois secamos as flores "
        "devagar, longe da luz, durante três semanas.",
    ],
}
KINDS = ("title", "sentence", "paragraph")


def measure(name: str, detect, texts: dict[str, list[str]]) -> None:  # type: ignore[no-untyped-def]
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    unknown = 0
    wrong: list[str] = []
    start = time.perf_counter()
    for lang, items in texts.items():
        for i, text in enumerate(items):
            kind = KINDS[i // 4]
            got = detect(text)
            total[kind] += 1
            if got == lang:
                right[kind] += 1
            elif got is None:
                unknown += 1
            else:
                wrong.append(f"{lang}→{got}: {text[:40]!r}")
    ms = (time.perf_counter() - start) * 1000 / sum(total.values())
    parts = ", ".join(f"{k}s {right[k]}/{total[k]}" for k in KINDS)
    n = sum(total.values())
    verdicts = f"{sum(right.values())}/{n} right ({parts}), {unknown} unknown, {len(wrong)} wrong"
    print(f"{name:<28} {verdicts}; {ms:.2f} ms a text")
    for w in wrong:
        print(f"    {w}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lingua", help="a directory lingua-language-detector is installed in (pip --target)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    full = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    seven = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    seven.set_languages(list(LANGS))
    print(f"py3langid: models loaded in {time.perf_counter() - t0:.2f} s")
    measure("py3langid (97 languages)", lambda t: full.classify(t)[0], TEXTS)
    measure("py3langid (7 languages)", lambda t: seven.classify(t)[0], TEXTS)
    if args.lingua:
        sys.path.insert(0, args.lingua)
        from lingua import IsoCode639_1, LanguageDetectorBuilder  # noqa: PLC0415 - not a dependency: from --lingua

        t0 = time.perf_counter()
        codes = [getattr(IsoCode639_1, c.upper()) for c in LANGS]
        detector = LanguageDetectorBuilder.from_iso_codes_639_1(*codes).with_preloaded_language_models().build()
        print(f"lingua: models loaded in {time.perf_counter() - t0:.2f} s")

        def lingua_detect(text: str) -> str | None:
            found = detector.detect_language_of(text)
            return found.iso_code_639_1.name.lower() if found else None

        measure("lingua (7 languages)", lingua_detect, TEXTS)
    language.identifier()  # its model loaded before the timing, as the parser processes have it
    measure("language.detect (the job's)", language.detect, TEXTS)
    measure("stop-word shares (before)", stop_word_guess, TEXTS)


def stop_word_guess(text: str) -> str | None:
    """What the job did before language.py: the language among the seven whose stop words are the
    largest share of the text's words, if at least 15 %."""
    words = terms.tokens(text)[:2000]
    if not words:
        return None
    shares = {lang: sum(1 for w in words if w in terms.stop_words_for(lang)) / len(words) for lang in LANGS}
    best = max(shares, key=lambda lang: shares[lang])
    return best if shares[best] >= 0.15 else None


if __name__ == "__main__":
    main()
