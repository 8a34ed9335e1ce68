"""The scripted recall check's data (issue 17): Tom, an English learner of Spanish (A2–B1),
talks with Pam over eight weeks — 150 messages of his, 150 of hers, in 15 sessions — and
plants 30 facts among the chit-chat: 6 names, 6 places, 6 dates, 6 preferences, 6 plans.
Eight of them he later updates or contradicts, long after he first said them. After
everything is folded he asks 30 questions, one per fact, the way a learner asks a friend:
in Spanish, in his own words, not the fact's (a human would see the match; a keyword
search has to work for it). Updated facts are asked about as they stand now.

Plain data: the tests (tests/memory/test_recall_quality.py) and the report
(bench/recall_quality.py) both read it; it lives in bench/ because bench/ never imports
tests/."""

from __future__ import annotations

from dataclasses import dataclass

NAMES, PLACES, DATES, PREFERENCES, PLANS = "names", "places", "dates", "preferences", "plans"
FACT_TYPES = (NAMES, PLACES, DATES, PREFERENCES, PLANS)
UPDATED = "updated"  # the cross-cut the report adds to the five types

# Days after the first session on which each of the 15 sessions happens (about 8 weeks).
SESSION_DAYS = (0, 3, 7, 10, 14, 18, 21, 25, 29, 32, 36, 40, 45, 50, 55)

# One exchange: (tag, what Tom writes, what Pam answers). The tag is "" for chit-chat, a
# fact's key where he first says it, and the key with "!" where he updates it.
Exchange = tuple[str, str, str]

SESSIONS: tuple[tuple[Exchange, ...], ...] = (
    (  # day 0: hello
        (
            "",
            "Hola Pam! Me llamo Tom y soy inglés. Quiero practicar mi español contigo.",
            "¡Hola, Tom! Encantada de conocerte. Vamos a practicar todo lo que quieras. "
            "¿Qué tal estás hoy?",
        ),
        (
            "city",
            "Estoy bien, gracias. Vivo en Madrid, en un piso pequeño en el barrio de Chamberí.",
            "¡Qué bien! Chamberí es un barrio con mucho encanto. ¿Te gusta vivir allí?",
        ),
        (
            "",
            "Sí, me gusta mucho. Estoy aprendiendo español desde hace un año pero mi gramática "
            "es muy mal.",
            "¡Seguro que no es para tanto! Un detalle: se dice «mi gramática es muy mala», "
            "porque gramática es un sustantivo femenino.",
        ),
        (
            "work",
            "Ah vale, mala. Trabajo como enfermero en un hospital grande, el Hospital La Paz.",
            "¡Qué trabajo tan importante! Los enfermeros trabajáis muchísimo. ¿Tienes turnos "
            "de noche?",
        ),
        (
            "",
            "Sí, a veces tengo turnos de noche y después estoy muy cansado todo el día.",
            "Me lo imagino. Dormir de día cuesta mucho. ¿Qué haces para descansar?",
        ),
        (
            "luna",
            "Tengo una perra que se llama Luna. Es un golden retriever y es muy loca, jaja.",
            "¡Qué nombre tan bonito! Los golden retriever son muy cariñosos. ¿Cuántos años tiene?",
        ),
        (
            "",
            "Tiene tres años. Cada mañana paseamos por el parque antes de trabajar.",
            "¡Perfecto para empezar el día! Muy bien usado «antes de trabajar».",
        ),
        (
            "",
            "Gracias. Hoy hace mucho frio en Madrid, no me gusta el invierno.",
            "Sí, en enero Madrid es muy frío. Recuerda la tilde: «frío». ¿En Inglaterra hace "
            "más frío?",
        ),
        (
            "jazz",
            "En Inglaterra llueve más. Por cierto, me encanta el jazz, sobre todo Chet Baker. "
            "Escucho jazz cada noche para relajar.",
            "¡Qué buen gusto! Chet Baker es precioso. Se dice «para relajarme», con el pronombre.",
        ),
        (
            "",
            "Para relajarme, vale. Bueno, tengo que irme. ¡Hasta pronto!",
            "¡Hasta pronto, Tom! Ha sido un placer.",
        ),
    ),
    (  # day 3
        (
            "",
            "Buenas tardes Pam. Hoy no trabajo, es mi día libre.",
            "¡Buenas tardes! Qué bien, un día libre. ¿Qué planes tienes?",
        ),
        (
            "birthplace",
            "Voy a limpiar el piso, jaja. Oye, no te dije antes: yo nací en Manchester, en el "
            "norte de Inglaterra.",
            "¡Manchester! Ciudad de fútbol y de música. ¿Eres del United o del City?",
        ),
        (
            "",
            "Del City, claro. Pero ahora no veo mucho fútbol.",
            "¡Buena elección! Muy bien la frase, perfecta.",
        ),
        (
            "",
            "Ayer yo fue al supermercado y compré muchas verduras.",
            "¡Qué sano! Una corrección: «yo fui», no «yo fue». «Fue» es para él o ella.",
        ),
        (
            "clara",
            "Fui, fui. Mi hermana mayor se llama Clara, ella vive en Londres y es abogada.",
            "¡Qué interesante! ¿Os veis a menudo Clara y tú?",
        ),
        (
            "",
            "No mucho, solo en Navidad. Hablamos por videollamada los domingos.",
            "Las videollamadas ayudan mucho cuando la familia está lejos.",
        ),
        (
            "",
            "Sí. ¿Cómo se dice 'to miss someone' en español?",
            "Se dice «echar de menos» o «extrañar». Por ejemplo: «Echo de menos a mi familia».",
        ),
        (
            "",
            "Echo de menos a mi familia. Me gusta esta expresión.",
            "¡Perfecto! Suena muy natural.",
        ),
        (
            "birthday",
            "Mi cumpleaños es el 14 de marzo, voy a cumplir 32 años.",
            "¡Ya queda poco! ¿Vas a hacer una fiesta?",
        ),
        (
            "",
            "No sé todavía. Quizás una cena con amigos. Adiós Pam!",
            "¡Adiós, Tom! Hasta la próxima.",
        ),
    ),
    (  # day 7
        (
            "",
            "Hola! Esta semana es muy difícil en el hospital, hay mucha gente con gripe.",
            "¡Vaya! En invierno siempre pasa. Cuídate tú también.",
        ),
        (
            "roommate",
            "Gracias. Por suerte mi compañero de piso, se llama Javi, cocina muy bien y me "
            "hace la cena.",
            "¡Qué suerte tener un compañero así! ¿Javi también es enfermero?",
        ),
        (
            "",
            "No, él es programador. Trabaja desde casa todo el día.",
            "Entonces Luna nunca está sola, ¡qué bien para ella!",
        ),
        (
            "",
            "Exacto, Luna lo quiere mucho. ¿Puedo preguntarte una cosa de gramática?",
            "¡Claro! Pregunta lo que quieras.",
        ),
        (
            "",
            "Cuando uso 'por' y cuando uso 'para'? Siempre me confundo.",
            "Es difícil para todos. «Para» indica finalidad o destino; «por» indica causa, "
            "medio o lugar de paso. «Estudio para aprender», «paseo por el parque».",
        ),
        (
            "",
            "Entiendo un poco mejor. Paseo por el parque con Luna.",
            "¡Exacto! Muy bien.",
        ),
        (
            "food",
            "Mi comida favorita es la paella de marisco. Javi la prepara los domingos.",
            "¡Qué rico! Una buena paella de marisco un domingo es lo mejor.",
        ),
        (
            "",
            "Sí, pero a veces está demasiado salado jaja.",
            "Jaja. Ojo: «está demasiado salada», porque paella es femenino.",
        ),
        (
            "",
            "Salada. Los géneros son muy difíciles para mí.",
            "Con práctica se aprenden. ¡Lo estás haciendo muy bien!",
        ),
        (
            "",
            "Gracias Pam, hasta luego.",
            "¡Hasta luego, Tom!",
        ),
    ),
    (  # day 10
        (
            "",
            "Hola Pam, que tal? Hoy estoy de buen humor.",
            "¡Hola! Me alegro mucho. ¿Qué ha pasado?",
        ),
        (
            "trip",
            "Compré los billetes! En abril voy a viajar a Japón con mi hermana Clara.",
            "¡Qué emoción! Japón en abril, con los cerezos en flor. ¿Cuántos días vais?",
        ),
        (
            "",
            "Dos semanas. Queremos ver Tokio y Kioto.",
            "¡Suena fantástico! Dos semanas dan para mucho.",
        ),
        (
            "",
            "Tengo que aprender algunas palabras en japonés también, jaja.",
            "¡Jaja, un idioma más! Primero «arigató», que significa «gracias».",
        ),
        (
            "dentist",
            "Otra cosa, menos divertida: tengo cita con el dentista el jueves 9 de abril por la "
            "mañana. Tengo miedo.",
            "Es normal tener un poco de miedo, pero seguro que no es nada. ¿Te duele algo?",
        ),
        (
            "",
            "Me duele un poco una muela cuando bebo cosas frías.",
            "Entonces es buena idea ir. Muy bien dicho «me duele una muela».",
        ),
        (
            "",
            "Hoy he leído un artículo en El País sobre el tiempo en España.",
            "¡Leer el periódico es muy buena práctica! ¿Entendiste casi todo?",
        ),
        (
            "",
            "Más o menos el setenta por ciento. Algunas palabras son muy técnicas.",
            "¡Un setenta por ciento está genial!",
        ),
        (
            "",
            "Bueno, ahora voy a pasear Luna.",
            "Se dice «pasear a Luna»: con animales y personas usamos la «a». ¡Que lo paséis bien!",
        ),
        (
            "",
            "A Luna, vale. Chao!",
            "¡Chao, Tom!",
        ),
    ),
    (  # day 14
        (
            "",
            "Hola Pam. Hoy llueve mucho y estoy en casa.",
            "¡Hola! Un día perfecto para practicar español. ¿Qué estás haciendo?",
        ),
        (
            "",
            "Estoy viendo una película española con subtítulos.",
            "¡Muy buena idea! ¿Qué película es?",
        ),
        (
            "",
            "Se llama 'Ocho apellidos vascos'. Es muy graciosa.",
            "¡Es una comedia muy famosa! Los chistes sobre vascos y andaluces son geniales.",
        ),
        (
            "restaurant",
            "Ayer cené en un restaurante peruano que se llama Inti, en la calle Argumosa. El "
            "ceviche fue increíble.",
            "¡Qué rico! La comida peruana es buenísima. Apunto: Inti, en Argumosa.",
        ),
        (
            "",
            "Tienes que probarlo! Ah no, tú no comes, jaja.",
            "¡Jaja, es verdad! Pero me encanta que me lo cuentes.",
        ),
        (
            "",
            "Pam, qué significa 'estar en las nubes'?",
            "Significa estar distraído, pensando en otras cosas. «Hoy estoy en las nubes».",
        ),
        (
            "",
            "Ah, yo estoy en las nubes muchas veces en el trabajo.",
            "¡Pues cuidado en el hospital! Jaja. La frase está perfecta.",
        ),
        (
            "hobby",
            "Jaja. Los sábados hago escalada en un rocódromo en Vallecas con unos amigos.",
            "¡Qué deporte tan completo! La escalada es muy buena para la fuerza.",
        ),
        (
            "",
            "Sí pero me duele los brazos después.",
            "Normal. Se dice «me duelen los brazos», en plural, porque los brazos son varios.",
        ),
        (
            "",
            "Me duelen. Gracias, adiós!",
            "¡Adiós! Que descanses.",
        ),
    ),
    (  # day 18
        (
            "exam",
            "Hola Pam! He decidido que me voy a presentar al examen DELE B1 en mayo.",
            "¡Genial, Tom! Un objetivo concreto ayuda mucho. Podemos preparar juntos la parte "
            "oral.",
        ),
        (
            "",
            "Sí por favor. La parte oral me da mucho miedo.",
            "Practicaremos con temas típicos: la familia, el trabajo, los viajes.",
        ),
        (
            "parents",
            "Vale. Empiezo con la familia: mis padres viven en un pueblo pequeño cerca de York. "
            "Mi padre está jubilado.",
            "¡Muy bien! ¿Y tu madre trabaja todavía?",
        ),
        (
            "",
            "Sí, ella es profesora de piano. Tiene muchos alumnos.",
            "¡Qué bonito! Entonces en tu casa siempre había música.",
        ),
        (
            "",
            "Sí, pero yo no toco bien el piano, jaja.",
            "¡Nunca es tarde para aprender! Muy bien la frase.",
        ),
        (
            "",
            "Hoy fue un día largo. Tuve tres pacientes muy difíciles.",
            "¡Qué cansancio! «Tuve» está perfecto, muy bien el pretérito.",
        ),
        (
            "",
            "Gracias. A veces los pacientes son enfadados.",
            "Se dice «están enfadados»: para estados de ánimo usamos «estar».",
        ),
        (
            "",
            "Están enfadados. Ser y estar es lo más difícil.",
            "Es de lo más difícil, sí. Poco a poco.",
        ),
        (
            "",
            "Mañana tengo turno de noche otra vez.",
            "Pues descansa bien hoy. ¿Luna se queda con Javi por la noche?",
        ),
        (
            "",
            "Sí, Javi la cuida. Buenas noches Pam.",
            "¡Buenas noches, Tom!",
        ),
    ),
    (  # day 21
        (
            "",
            "Hola, hoy estoy muy cansado, fue una noche muy larga.",
            "¡Ánimo! Después de un turno de noche hay que descansar. ¿Has dormido algo?",
        ),
        (
            "",
            "Dormí cuatro horas. Ahora tomo algo y practico un poco contigo.",
            "¡Qué dedicación! Vamos poco a poco.",
        ),
        (
            "cilantro",
            "Una cosa que no sabes: odio el cilantro. Para mí sabe a jabón, qué asco.",
            "¡Jaja, le pasa a mucha gente! Es algo genético, dicen.",
        ),
        (
            "",
            "De verdad? Es genético? No lo sabía.",
            "Sí, hay personas que perciben un sabor a jabón por sus genes.",
        ),
        (
            "",
            "Qué interesante. En el restaurante peruano tenía que pedir sin cilantro.",
            "¡Buena estrategia! En la cocina peruana se usa mucho.",
        ),
        (
            "",
            "Hoy hace sol, por fin. Voy a ir al Retiro con Luna.",
            "¡Qué plan tan bonito! El Retiro con sol es lo mejor de Madrid.",
        ),
        (
            "",
            "Hay muchos perros en el Retiro los fines de semana.",
            "Seguro que Luna hace muchos amigos allí.",
        ),
        (
            "",
            "Sí, ella tiene un amigo, un perro negro que se llama Toby.",
            "¡Qué monos! Luna y Toby, buena pareja.",
        ),
        (
            "",
            "Jaja sí. Bueno me voy, gracias por la clase.",
            "¡De nada! Disfruta del sol.",
        ),
        (
            "",
            "Hasta mañana!",
            "¡Hasta mañana, Tom!",
        ),
    ),
    (  # day 25
        (
            "",
            "Hola Pam! Hoy quiero practicar el pasado.",
            "¡Perfecto! Cuéntame algo que hiciste el fin de semana.",
        ),
        (
            "cambados",
            "El verano pasado estuve en Galicia, en un pueblo que se llama Cambados. Bebimos "
            "mucho albariño.",
            "¡Qué bien! Cambados es famoso por su vino albariño. Muy bien «estuve» y «bebimos».",
        ),
        (
            "",
            "Gracias! También comí pulpo por primera vez.",
            "¡El pulpo a la gallega! ¿Te gustó?",
        ),
        (
            "",
            "Sí, pero la textura es un poco rara para mí.",
            "Es verdad que es especial. Frase perfecta.",
        ),
        (
            "",
            "Este fin de semana fui al cine con Javi. Vimos una película de terror.",
            "¡Qué valientes! ¿Pasaste mucho miedo?",
        ),
        (
            "",
            "Un poco, jaja. Javi gritó más que yo.",
            "¡Jaja! Muy bien usado el pretérito: «gritó».",
        ),
        (
            "bigotes",
            "Mi madre tiene un gato gris muy gordo que se llama Bigotes. Le encanta dormir en "
            "el piano.",
            "¡Qué gracioso! Un gato gordo durmiendo sobre el piano de una profesora de música.",
        ),
        (
            "",
            "Sí, y cuando mi madre toca, él no se mueve.",
            "¡Es un gato melómano! Jaja.",
        ),
        (
            "",
            "Qué significa melómano?",
            "Una persona (o un gato) a la que le encanta la música.",
        ),
        (
            "",
            "Jaja perfecto. Adiós!",
            "¡Adiós, Tom!",
        ),
    ),
    (  # day 29
        (
            "",
            "Hola Pam, hoy tengo un poco de tiempo antes del trabajo.",
            "¡Hola! Aprovechemos. ¿De qué quieres hablar?",
        ),
        (
            "tea",
            "De mis costumbres. Por la mañana siempre tomo té verde, porque el café me pone "
            "muy nervioso.",
            "¡Buena costumbre! El té verde es más suave. Frase perfecta.",
        ),
        (
            "",
            "Y después del trabajo tomo una cerveza con mis compañeros a veces.",
            "¡Muy español eso de la cerveza después del trabajo!",
        ),
        (
            "marathon",
            "Tengo un reto nuevo: quiero correr la media maratón de Valencia en diciembre. Ya "
            "entreno tres días por semana.",
            "¡Qué reto! Veintiún kilómetros. ¿Corres por el Retiro?",
        ),
        (
            "",
            "Sí, corro con Luna por el Retiro, ella es más rápida que yo.",
            "¡Jaja, seguro! Muy bien el comparativo «más rápida que yo».",
        ),
        (
            "",
            "Cómo se dice 'shin splints'?",
            "Se dice «periostitis tibial», pero mucha gente dice simplemente «me duele la "
            "espinilla».",
        ),
        (
            "",
            "Uf, palabra muy larga. Me duele la espinilla es más fácil.",
            "¡Mucho más fácil, sí!",
        ),
        (
            "",
            "Esta semana en el hospital hay menos trabajo, menos gripe.",
            "¡Qué alivio! Por fin un poco de calma.",
        ),
        (
            "",
            "Sí, estoy más relajado. Bueno, me voy al hospital.",
            "¡Que vaya bien el turno!",
        ),
        (
            "",
            "Gracias, chao!",
            "¡Chao!",
        ),
    ),
    (  # day 32
        (
            "",
            "Hola! Hoy es un día normal, nada especial.",
            "¡Hola, Tom! Los días normales también están bien. ¿Qué tal el trabajo?",
        ),
        (
            "",
            "Bien, tranquilo. Pam, puedes explicarme el subjuntivo? Es un monstruo.",
            "¡Jaja, el subjuntivo asusta a todos! Se usa para deseos, dudas y emociones: "
            "«Quiero que vengas», «Espero que llueva».",
        ),
        (
            "",
            "Espero que mañana hace sol.",
            "Casi: «Espero que mañana haga sol». Después de «espero que» va subjuntivo.",
        ),
        (
            "",
            "Haga sol. Uf, es difícil.",
            "¡Poco a poco! Ya lo estás usando.",
        ),
        (
            "moto",
            "Otra noticia: estoy ahorrando dinero para comprar una moto, una Vespa roja como "
            "en las películas italianas.",
            "¡Qué estilo! Una Vespa roja por Madrid, me encanta la idea.",
        ),
        (
            "",
            "Sí, pero son muy caras. Necesito ahorrar seis meses más.",
            "Con paciencia llegarás. ¡Ánimo!",
        ),
        (
            "series",
            "Por la noche veo series. Mi serie favorita es La Casa de Papel, la vi dos veces "
            "entera.",
            "¡Es muy famosa en todo el mundo! Además es buena práctica de escucha.",
        ),
        (
            "",
            "Sí, pero hablan muy rápido y dicen muchas palabrotas, jaja.",
            "¡Jaja, así aprendes el español de verdad!",
        ),
        (
            "",
            "Ahora voy a estudiar un poco de vocabulario del examen.",
            "¡Muy bien! Constancia es la clave.",
        ),
        (
            "",
            "Adiós Pam.",
            "¡Adiós, Tom!",
        ),
    ),
    (  # day 36
        (
            "",
            "Hola Pam, tengo noticias importantes!",
            "¡Cuéntame! Me tienes intrigada.",
        ),
        (
            "interview",
            "Tengo una entrevista de trabajo en Sevilla el martes 3 de marzo, en una clínica "
            "privada. Estoy muy nervioso.",
            "¡Qué emocionante! Sevilla es una ciudad preciosa. Podemos practicar preguntas de "
            "entrevista.",
        ),
        (
            "",
            "Sí, por favor. Qué me van a preguntar?",
            "Seguro que te preguntan por tu experiencia: «¿Cuántos años llevas trabajando de "
            "enfermero?»",
        ),
        (
            "",
            "Llevo siete años trabajando de enfermero, tres en España y cuatro en Inglaterra.",
            "¡Respuesta perfecta! Muy bien usado «llevo … trabajando».",
        ),
        (
            "",
            "Y si me preguntan por qué quiero cambiar?",
            "Puedes decir que buscas nuevos retos y que te encanta Andalucía.",
        ),
        (
            "",
            "Busco nuevos retos y me encanta Andalucía. Y el sol, jaja.",
            "¡Jaja! El sol de Sevilla convence a cualquiera.",
        ),
        (
            "andres",
            "Además empecé clases de guitarra. Mi profesor se llama Andrés y es muy paciente "
            "conmigo.",
            "¡Qué bien! La guitarra española es preciosa. Un profesor paciente es un tesoro.",
        ),
        (
            "",
            "Sí, porque yo soy muy lento aprendiendo los acordes.",
            "¡Normal al principio! Frase muy bien construida.",
        ),
        (
            "",
            "Ahora tengo que practicar la canción que me dio.",
            "¡A practicar! Ya me contarás.",
        ),
        (
            "",
            "Vale, hasta pronto!",
            "¡Hasta pronto, Tom! Suerte con la guitarra.",
        ),
    ),
    (  # day 40
        (
            "",
            "Hola Pam. La entrevista fue muy bien, creo!",
            "¡Qué alegría! ¿Qué te preguntaron?",
        ),
        (
            "",
            "Me preguntaron sobre mi experiencia y si hablo bien español. Dije que sí, jaja.",
            "¡Y es verdad! Tu español ha mejorado muchísimo.",
        ),
        (
            "leo",
            "Gracias! Otra cosa: mi hermana Clara tiene un hijo, mi sobrino se llama Leo y "
            "tiene cinco años. Hoy es su cumpleaños.",
            "¡Felicidades a Leo! Cinco años, qué edad tan divertida.",
        ),
        (
            "",
            "Le mandé un regalo desde aquí, un balón del Real Madrid.",
            "¡Qué buen tío! Aunque tú eres del City, jaja.",
        ),
        (
            "mum_birthday",
            "Jaja sí. También tengo que recordar que el 2 de junio es el cumpleaños de mi madre. "
            "Quiero mandarle flores.",
            "¡Qué detalle! Las flores siempre gustan.",
        ),
        (
            "",
            "Qué flores son típicas en España para las madres?",
            "Las rosas y los claveles son muy típicos. El clavel es muy español.",
        ),
        (
            "",
            "Claveles, qué bonito. Nunca he escuchado esa palabra.",
            "Se dice «nunca había oído» o «nunca he oído esa palabra»: con palabras solemos "
            "decir «oír».",
        ),
        (
            "",
            "Nunca he oído. Vale.",
            "¡Perfecto!",
        ),
        (
            "camino",
            "Otro plan: en agosto quiero hacer el Camino de Santiago andando, desde Sarria, con "
            "mi amigo Marco.",
            "¡Qué experiencia! Desde Sarria son unos cien kilómetros. Llevad buen calzado.",
        ),
        (
            "",
            "Buenas noches!",
            "¡Buenas noches, Tom!",
        ),
    ),
    (  # day 45: the move
        (
            "",
            "Pam!! Me dieron el trabajo en Sevilla!",
            "¡Enhorabuena, Tom! ¡Qué noticia tan buena! ¿Cuándo empiezas?",
        ),
        (
            "city!",
            "Ya empecé. Me mudé la semana pasada y ahora vivo en Sevilla, en el barrio de "
            "Triana, cerca del río.",
            "¡Qué cambio! Triana es un barrio con mucho arte, y el Guadalquivir al lado.",
        ),
        (
            "",
            "Sí, es muy bonito. Luna está conmigo, le gusta pasear por el río.",
            "¡Luna sevillana! Seguro que se adapta rápido.",
        ),
        (
            "",
            "Aquí hace mucho más calor que en Madrid, y es febrero.",
            "¡Espera a julio! Jaja. En verano Sevilla es un horno.",
        ),
        (
            "cooking",
            "Tengo un plan para el mes que viene: me voy a apuntar a un curso de cocina "
            "tailandesa en Sevilla.",
            "¡Qué original! La cocina tailandesa tiene sabores increíbles. Ojo con el cilantro, "
            "jaja.",
        ),
        (
            "",
            "Jaja sí, voy a pedir sin cilantro siempre.",
            "¡Buena idea!",
        ),
        (
            "",
            "Los sevillanos hablan muy rápido y no pronuncian la s final.",
            "¡Es verdad! El andaluz tiene su encanto. «¿Qué pasa, quillo?»",
        ),
        (
            "",
            "Quillo? Qué significa?",
            "Es una forma cariñosa de decir «chiquillo», como «tío» en Madrid.",
        ),
        (
            "",
            "Jaja me gusta. Bueno, voy a desempacar más cajas.",
            "Se dice «deshacer las cajas» o «desembalar». ¡Ánimo con la mudanza!",
        ),
        (
            "",
            "Desembalar. Gracias!",
            "¡De nada, Tom!",
        ),
    ),
    (  # day 50
        (
            "work!",
            "Hola Pam. Bueno, ya es oficial: cambié de trabajo. Ya no estoy en el Hospital "
            "La Paz, ahora trabajo en la Clínica Santa Isabel en Triana.",
            "¡Enhorabuena otra vez! ¿Qué tal los compañeros de la clínica?",
        ),
        (
            "",
            "Son muy simpáticos. Y el horario es mejor, no hay turnos de noche.",
            "¡Eso es lo mejor! Por fin vas a dormir de noche.",
        ),
        (
            "trip!",
            "Otra cosa: al final no voy a Japón, voy a Corea del Sur con Clara. Los vuelos "
            "eran mucho más baratos.",
            "¡Corea también es un destino fantástico! Seúl tiene mucha vida.",
        ),
        (
            "",
            "Sí, y la comida coreana me encanta, el kimchi sobre todo.",
            "¡El kimchi es adictivo! Muy bien «sobre todo».",
        ),
        (
            "roommate!",
            "Y en Sevilla comparto piso con una chica que se llama Nuria. Es profesora de "
            "flamenco.",
            "¡Qué interesante! Con Nuria seguro que aprendes a bailar sevillanas.",
        ),
        (
            "",
            "Jaja, no creo, yo bailo muy mal.",
            "¡Todo se aprende! Como el español.",
        ),
        (
            "wedding",
            "Tengo una boda este verano: mi prima Laura se casa el 5 de julio en Granada.",
            "¡Una boda en Granada en julio! Con la Alhambra de fondo, qué bonito.",
        ),
        (
            "",
            "Sí, pero hará mucho calor. Necesito un traje ligero.",
            "¡Muy bien el futuro «hará»! Un traje de lino sería perfecto.",
        ),
        (
            "",
            "Lino, apunto la palabra. Hasta luego Pam!",
            "¡Hasta luego, Tom!",
        ),
        (
            "",
            "Ah, y Luna te manda saludos, jaja.",
            "¡Jaja, saludos a Luna también!",
        ),
    ),
    (  # day 55
        (
            "dentist!",
            "Hola Pam. El dentista me llamó y cambió la cita: ahora es el lunes 13 de abril a "
            "las cinco de la tarde.",
            "Bueno, así tienes unos días más para prepararte. ¿Sigue doliéndote la muela?",
        ),
        (
            "",
            "Un poco, pero menos. Tomo cosas menos frías.",
            "¡Buena idea! Frase perfecta.",
        ),
        (
            "food!",
            "Tengo una noticia: ahora soy vegetariano, ya no como paella de marisco. Mi "
            "favorito es el salmorejo, lo pido en todos los bares.",
            "¡El salmorejo es una maravilla, y muy andaluz! Con un poco de aceite de oliva.",
        ),
        (
            "hobby!",
            "Y dejé la escalada porque me lesioné el hombro. Ahora hago yoga tres veces por "
            "semana, me ayuda mucho.",
            "Siento lo del hombro. El yoga es muy buena opción para recuperarse.",
        ),
        (
            "",
            "En Sevilla hay naranjos en todas las calles, huele muy bien.",
            "¡Es el azahar! En primavera Sevilla huele a flor de naranjo.",
        ),
        (
            "",
            "Azahar, qué palabra bonita. Es de origen árabe?",
            "¡Sí! Muchas palabras que empiezan por «a-» o «al-» vienen del árabe: azúcar, "
            "aceite, almohada.",
        ),
        (
            "exam!",
            "Y sobre el examen: he decidido hacer el DELE B2 en vez del B1, y lo haré en "
            "noviembre, no en mayo.",
            "¡Muy valiente! Con tu progreso, el B2 en noviembre es un buen objetivo.",
        ),
        (
            "visit",
            "Mis padres vienen a visitarme a Sevilla el 25 de abril, por la Feria.",
            "¡Qué bien! La Feria de Abril es el mejor momento para conocer Sevilla.",
        ),
        (
            "",
            "Qué interesante. Bueno, mañana trabajo temprano, me voy a dormir.",
            "¡A descansar! Has progresado muchísimo estas semanas, Tom.",
        ),
        (
            "",
            "Gracias por todo Pam, hablamos pronto!",
            "¡Gracias a ti, Tom! Hablamos pronto.",
        ),
    ),
)

# After everything is folded: one question per fact, asked as Tom would ask a friend.
# key: (fact type, question). Updated facts are asked about as they stand now.
ASKED: dict[str, tuple[str, str]] = {
    "luna": (NAMES, "¿Te acuerdas del nombre de mi perrita?"),
    "clara": (NAMES, "¿Cómo se llamaba mi hermana, la abogada?"),
    "roommate": (NAMES, "¿Cómo se llama la chica con la que vivo ahora?"),
    "bigotes": (NAMES, "¿Cuál era el nombre del gato de mi mamá?"),
    "andres": (NAMES, "¿Cómo se llama el profe que me enseña a tocar la guitarra?"),
    "leo": (NAMES, "Oye, ¿cómo se llama el niño de mi hermana?"),
    "city": (PLACES, "¿En qué ciudad estoy viviendo ahora?"),
    "work": (PLACES, "¿Dónde estoy trabajando en este momento?"),
    "birthplace": (PLACES, "¿Te acuerdas de la ciudad inglesa donde yo nací?"),
    "restaurant": (PLACES, "¿Cómo se llamaba aquel sitio de comida peruana que me gustó tanto?"),
    "parents": (PLACES, "¿Dónde viven mis papás?"),
    "cambados": (PLACES, "¿Cuál era el pueblo gallego de mis vacaciones de verano?"),
    "birthday": (DATES, "¿Qué día cumplo años yo?"),
    "dentist": (DATES, "¿Para cuándo es por fin lo del dentista?"),
    "interview": (DATES, "¿Qué día tuve la entrevista para el trabajo nuevo?"),
    "mum_birthday": (DATES, "¿Cuándo cumple años mi mamá?"),
    "wedding": (DATES, "¿En qué fecha es la boda de mi prima?"),
    "visit": (DATES, "¿Cuándo venían mis papás a verme?"),
    "jazz": (PREFERENCES, "¿Qué tipo de música me gusta escuchar por las noches?"),
    "food": (PREFERENCES, "¿Cuál es mi plato preferido desde que me hice vegetariano?"),
    "hobby": (PREFERENCES, "¿Qué actividad hago ahora después de mi lesión?"),
    "cilantro": (PREFERENCES, "¿Qué ingrediente odio que me pongan en la comida?"),
    "tea": (PREFERENCES, "¿Qué suelo tomar por las mañanas, café o té?"),
    "series": (PREFERENCES, "¿Cuál es esa serie española que me encanta?"),
    "trip": (PLANS, "¿A qué país me voy de viaje en abril?"),
    "exam": (PLANS, "¿Qué nivel del DELE voy a hacer y cuándo?"),
    "marathon": (PLANS, "¿Para qué carrera estoy entrenando?"),
    "moto": (PLANS, "¿Qué quería comprarme con mis ahorros?"),
    "cooking": (PLANS, "¿De qué era el curso que quería hacer para aprender a cocinar?"),
    "camino": (PLANS, "¿Qué ruta voy a caminar este verano?"),
}

# A second phrasing of each question, written after the search had been tuned against ASKED
# and kept out of that tuning: how far the tuning carries to questions it has not seen. The
# report scores it beside ASKED; the test asserts only ASKED's target.
HELD_OUT: dict[str, str] = {
    "luna": "¿Te acuerdas de cómo se llama mi mascota?",
    "clara": "¿Te acuerdas del nombre de mi hermana?",
    "roommate": "¿Quién es mi compañera de piso ahora?",
    "bigotes": "¿Cómo se llama la mascota de mi madre?",
    "andres": "¿Quién es mi profesor de guitarra?",
    "leo": "¿Te acuerdas del nombre de mi sobrinito?",
    "city": "¿Cuál es mi barrio ahora?",
    "work": "¿Cómo se llama la clínica donde trabajo?",
    "birthplace": "¿Cuál es mi ciudad natal?",
    "restaurant": "¿Dónde cené ceviche aquella vez?",
    "parents": "¿En qué parte de Inglaterra están mis padres?",
    "cambados": "¿Dónde bebí tanto vino blanco en Galicia?",
    "birthday": "¿Cuándo es mi cumple?",
    "dentist": "¿Cuándo tengo la cita del dentista?",
    "interview": "¿Cuándo fue la entrevista de Sevilla?",
    "mum_birthday": "¿Para cuándo tengo que tener listo el regalo para mi madre?",
    "wedding": "¿Qué día es la boda en Granada?",
    "visit": "¿Qué fecha me dijeron mis padres para venir a Sevilla?",
    "jazz": "¿Qué música pongo para relajarme?",
    "food": "¿Cuál es mi tapa favorita ahora?",
    "hobby": "¿Sigo haciendo escalada?",
    "cilantro": "¿Hay alguna hierba que no me guste nada?",
    "tea": "¿Qué bebo para desayunar?",
    "series": "¿Cómo se llamaba la serie de atracos que vi?",
    "trip": "¿Sigue en pie lo de Japón?",
    "exam": "¿Cuándo es mi examen de español?",
    "marathon": "¿Cuántos kilómetros voy a correr en Valencia?",
    "moto": "¿Qué vehículo me quiero comprar?",
    "cooking": "¿Qué tipo de cocina voy a aprender?",
    "camino": "¿Qué plan tengo para agosto?",
}

# The other learner, for isolation: words that overlap Tom's questions, none of his facts.
OTHER_LEARNER: tuple[tuple[str, str], ...] = (
    (
        "learner",
        "Mi perrita se llama Kira y mi gato se llama Misi. Mi hermana se llama Marta.",
    ),
    ("pam", "¡Kira y Misi, qué nombres tan simpáticos! ¿Y Marta también tiene animales?"),
    (
        "learner",
        "Ahora estoy viviendo en Bilbao y estoy trabajando en una clínica de Bilbao.",
    ),
    ("pam", "¡Bilbao es una ciudad estupenda! ¿Te gusta la clínica?"),
    (
        "learner",
        "En abril me voy de viaje a Portugal y mis papás vienen a verme en mayo.",
    ),
    ("pam", "¡Qué bien, Portugal en abril es precioso!"),
    (
        "learner",
        "Mi plato preferido es el cocido, odio el ajo, y por las mañanas suelo tomar café.",
    ),
    ("pam", "¡El cocido es un clásico! Qué pena lo del ajo, jaja."),
    (
        "learner",
        "Estoy entrenando para una carrera y ahorrando para comprar un coche. Cumplo años "
        "en enero y la boda de mi prima es en octubre.",
    ),
    ("pam", "¡Cuántos planes! Mucho ánimo con la carrera."),
)


@dataclass(frozen=True)
class Question:
    """One question after the fold: the fact's key and type, what Tom asks, the index in
    MESSAGES of the message that holds the fact as it stands now, and for an updated fact the
    index of the message it superseded."""

    key: str
    fact_type: str
    text: str
    fact_index: int
    superseded_index: int | None


def _messages() -> tuple[tuple[tuple[str, str], ...], dict[str, int]]:
    messages: list[tuple[str, str]] = []
    where: dict[str, int] = {}
    for session in SESSIONS:
        for tag, learner, pam in session:
            if tag:
                if tag in where:
                    raise ValueError(f"fact {tag!r} planted twice")
                where[tag] = len(messages)
            messages.append(("learner", learner))
            messages.append(("pam", pam))
    return tuple(messages), where


# The whole conversation, oldest first: (role, text), Tom ("learner") and Pam alternating.
MESSAGES, _WHERE = _messages()


def _said_days() -> tuple[int, ...]:
    days: list[int] = []
    for day, session in zip(SESSION_DAYS, SESSIONS, strict=True):
        days.extend([day] * (2 * len(session)))
    return tuple(days)


# The day (after the first session) each message of MESSAGES was said on.
SAID_ON_DAY = _said_days()


def _questions(asked: dict[str, tuple[str, str]]) -> tuple[Question, ...]:
    return tuple(
        Question(
            key,
            fact_type,
            text,
            _WHERE.get(f"{key}!", _WHERE[key]),
            _WHERE[key] if f"{key}!" in _WHERE else None,
        )
        for key, (fact_type, text) in asked.items()
    )


QUESTIONS = _questions(ASKED)
HELD_OUT_QUESTIONS = _questions({key: (ASKED[key][0], text) for key, text in HELD_OUT.items()})
